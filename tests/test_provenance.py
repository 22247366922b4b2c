"""Page spans and section paths, worked by hand."""

from engine.extract import Section, page_span, section_path


def test_page_span_maps_character_ranges_to_one_based_pages():
    pages = (0, 100, 250)  # page 1: [0,100), page 2: [100,250), page 3: [250, ...)
    assert page_span(pages, 0, 50) == (1, 1)
    assert page_span(pages, 90, 100) == (1, 1)      # end is exclusive
    assert page_span(pages, 90, 101) == (1, 2)
    assert page_span(pages, 100, 400) == (2, 3)
    assert page_span(None, 0, 10) == (None, None)


def test_section_path_follows_heading_levels():
    sections = (Section(0, 1, "1 Intro"), Section(50, 1, "3 Model"), Section(80, 2, "3.1 LRS model"),
                Section(120, 3, "Proof"), Section(160, 2, "3.2 Other"))
    assert section_path(sections, 10) == "1 Intro"
    assert section_path(sections, 80) == "3 Model › 3.1 LRS model"
    assert section_path(sections, 130) == "3 Model › 3.1 LRS model › Proof"
    assert section_path(sections, 170) == "3 Model › 3.2 Other"
    assert section_path((Section(5, 1, "Late"),), 0) is None
