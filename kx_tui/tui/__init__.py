"""The Textual workbench: the app, its screens, widgets and messages."""
