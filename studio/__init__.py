"""Graph Studio: the Django project and app that host graphs and make their runs visible."""
