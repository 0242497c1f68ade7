# Outside test suites run as references (tests/peer/run_dynamo.py runs them under ember): their
# files are not collected by pytest as ember tests; tests/peer/test_dynamo_functions.py runs the
# harness and checks the known outcomes.
collect_ignore_glob = ["dynamo/*"]
