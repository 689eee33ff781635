"""The hidden tests: the inputs (cases.py), the fixtures that run the submission on them
(conftest.py) and one test per graded part (test_rubric.py)."""
