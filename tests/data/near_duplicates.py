"""A 76-document corpus for MMR's end-to-end test: three near-identical shipping
notes among 73 distinct one-passage documents, several of them about shipping,
warehouses and couriers so the notes do not win on topic alone."""

from __future__ import annotations

NOTES = [
    f"# Shipping note {n}\n\nParcels ship from the Leeds warehouse every weekday morning by courier."
    for n in (1, 2, 3)
]

DISTINCT = [
    ("Courier cut-off times", "Orders placed before 2 pm are handed to the courier the same afternoon; later orders leave the next working day."),
    ("International shipping", "Shipments outside the UK go by air freight and need a customs declaration listing the contents and their value."),
    ("Warehouse safety induction", "Everyone who enters the Leeds warehouse floor wears a high-visibility vest and safety boots, visitors included."),
    ("Returns address", "Send returned goods to the returns desk at the Bradford depot, with the return number written on the box."),
    ("Tracking a parcel", "Each parcel gets a tracking number by email once the courier scans it; tracking updates can take four hours to appear."),
    ("Packaging standards", "Fragile instruments are double-boxed with at least five centimetres of foam on every side."),
    ("Stock counts", "The warehouse team counts every shelf on the last Friday of each quarter, so picking pauses that afternoon."),
    ("Pallet deliveries", "Suppliers book pallet deliveries at least two days ahead; the loading bay takes lorries from 7 am to 11 am."),
    ("Lost parcels", "If a parcel has not arrived ten working days after dispatch, the customer service team opens a claim with the carrier."),
    ("Courier contracts", "We renegotiate the courier contract every spring, comparing price per parcel, damage rates and on-time delivery."),
    ("Cold-chain shipments", "Reagents that must stay below eight degrees travel in insulated boxes with ice packs and a temperature logger."),
    ("Saturday collections", "There is no courier collection at weekends; urgent Saturday orders need a manager to book a same-day van."),
    ("Warehouse opening hours", "Staff can collect stock from the warehouse counter between 9 am and 4 pm, Monday to Thursday."),
    ("Dangerous goods", "Lithium batteries ship only by road, packed to the carrier's dangerous-goods rules with the right hazard label."),
    ("Delivery complaints", "A customer who reports a damaged delivery should send photos of the box and the contents within 48 hours."),
    ("Annual leave requests", "Book annual leave in the HR portal at least two weeks ahead; your manager approves or declines within three days."),
    ("Sick leave", "Tell your manager before 10 am on the first day of sickness; from the eighth day you need a doctor's note."),
    ("Parental leave", "Parents may take up to 18 weeks of unpaid parental leave per child before the child's eighteenth birthday."),
    ("Core working hours", "Core hours are 10 am to 3 pm; outside them you can arrange your day as your team agrees."),
    ("Remote work equipment", "Remote staff may claim a desk chair and a monitor once, up to 300 pounds, with receipts."),
    ("Home office stipend", "A monthly stipend of 25 pounds covers broadband and electricity for people working from home three days a week or more."),
    ("Working abroad", "Working from another country for more than 20 days a year needs approval from HR and the tax team."),
    ("VPN access", "Connect through the company VPN before opening internal tools; the client asks for your hardware token every twelve hours."),
    ("Password policy", "Passwords are at least 14 characters; the password manager generates and stores them, so never reuse one."),
    ("Building badges", "Lost building badges are blocked within the hour; reception prints a temporary badge valid for one day."),
    ("Phishing reports", "Forward suspicious email to the security inbox with the report button; never click links in it first."),
    ("Laptop encryption", "Every laptop is encrypted with a recovery key held by IT; a laptop that fails the check is locked out of email."),
    ("Travel booking", "Book flights and hotels through the travel portal; bookings made elsewhere are not reimbursed."),
    ("Mileage claims", "Mileage for business trips in your own car is repaid at 45 pence a mile for the first 10,000 miles a year."),
    ("Hotel limits", "Hotel rooms are capped at 150 pounds a night in London and 110 pounds elsewhere, breakfast included."),
    ("Expense deadlines", "Submit expense claims within 60 days with itemised receipts; claims older than that need a director's sign-off."),
    ("Meal allowance", "On business travel, meals are covered up to 40 pounds a day; alcohol is never reimbursed."),
    ("Onboarding buddy", "Each new starter is paired with a buddy from another team for their first six weeks."),
    ("First day", "On your first day, collect your laptop and badge from IT on the second floor at 9:30."),
    ("Probation reviews", "Probation lasts six months, with check-ins at one and three months and a review at the end."),
    ("Training budget", "Each employee has 1,000 pounds a year for courses, books and conferences, agreed with their manager."),
    ("Refund policy", "Customers can return unused loggers within 30 days for a full refund, provided the seal is intact."),
    ("Faulty loggers", "A data logger that fails within the two-year warranty is repaired or replaced free of charge."),
    ("Calibration service", "We calibrate temperature loggers against a reference sensor and issue a certificate valid for twelve months."),
    ("Firmware updates", "Logger firmware updates install over USB with the desktop app; never unplug the logger during an update."),
    ("Battery life", "A logger recording every five minutes runs about eighteen months on one battery."),
    ("Data export", "Recorded readings export to CSV or PDF; the PDF report includes the alarm limits and any breaches."),
    ("Alarm thresholds", "Set high and low alarm limits per logger; a breach makes the status light flash red until acknowledged."),
    ("Sensor accuracy", "The standard probe is accurate to half a degree between minus twenty and plus sixty degrees."),
    ("Bulk orders", "Orders of fifty loggers or more get a volume discount and a dedicated account manager."),
    ("Invoices", "Invoices are emailed on dispatch and are payable within 30 days by bank transfer."),
    ("Purchase orders", "Public-sector customers must quote a purchase order number, which appears on the invoice."),
    ("Price changes", "List prices are reviewed every January; quotes stay valid for 60 days from the date of issue."),
    ("Customer support hours", "The support line is open 8 am to 6 pm on weekdays; email gets an answer within one working day."),
    ("Service level", "Priority customers get a callback within two hours for any fault that stops their monitoring."),
    ("Meeting rooms", "Book meeting rooms in the calendar; a room not claimed within fifteen minutes is released."),
    ("Dispatch schedule", "Orders packed by noon go out the same day: the courier van collects from our Leeds site at 3 pm."),
    ("Morning courier run", "The courier's morning run picks up parcels from the warehouse loading bay before 9 am, Monday to Friday."),
    ("Parking", "Staff parking is first come, first served; the six bays nearest the door are kept for visitors."),
    ("Fire drills", "Fire drills happen twice a year without warning; leave by the nearest exit and gather in the north car park."),
    ("First aid", "Trained first aiders are listed on the noticeboard on every floor; the first-aid kit is by the lifts."),
    ("Leeds depot", "The Leeds depot packs and ships web orders; it is closed on bank holidays, when parcels wait until the next weekday."),
    ("Next-day delivery", "Parcels shipped by courier in the morning usually arrive the next working day anywhere in mainland Britain."),
    ("Company holidays", "The office closes between Christmas and New Year; those days do not come out of annual leave."),
    ("Volunteering days", "Everyone can take two paid volunteering days a year for a registered charity."),
    ("Pension", "The company pays 6 percent of salary into the pension when you pay in at least 4 percent."),
    ("Payroll dates", "Salaries are paid on the 25th of each month, or the working day before if it falls on a weekend."),
    ("Performance reviews", "Reviews happen each October; goals for the next year are agreed at the same meeting."),
    ("Whistleblowing", "Concerns about wrongdoing can be raised in confidence with the independent hotline, anonymously if you prefer."),
    ("Data protection", "Customer personal data stays in the CRM; never export it to spreadsheets on your own laptop."),
    ("Software requests", "Ask IT for new software through the service desk; unapproved installations are removed automatically."),
    ("Mobile phones", "Company phones are replaced every three years; report a lost phone to IT at once so it can be wiped."),
    ("Visitor policy", "Visitors sign in at reception, wear a visitor badge and are accompanied by their host at all times."),
    ("Dress code", "There is no dress code in the office; on the warehouse floor closed shoes are required."),
    ("Supplier onboarding", "New suppliers complete a due-diligence form and a bank-detail check before their first order."),
    ("Inventory system", "Every stock movement is scanned into the inventory system, which updates the web shop's stock levels hourly."),
    ("Van fleet", "The two company vans are booked through facilities and must be returned with at least half a tank."),
    ("Export licences", "Some sensors need an export licence for certain countries; the compliance team checks every overseas order."),
]
assert len(DISTINCT) == 73, len(DISTINCT)


def documents() -> list[tuple[str, str]]:
    """(name, text) for all 76 documents: the three notes first, then the rest."""
    docs = [(f"shipping-note-{i}", text) for i, text in enumerate(NOTES, start=1)]
    docs += [(title.lower().replace(" ", "-"), f"# {title}\n\n{body}") for title, body in DISTINCT]
    return docs
