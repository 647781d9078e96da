"""The command line's admin side: mqadmin-style commands over ``broker_core.client.admin``.

``admin`` declares the commands and runs them, ``args`` parses argument values
(timestamps, booleans), ``output`` renders results as tables or JSON.
"""
