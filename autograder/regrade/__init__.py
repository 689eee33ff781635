"""`make grade-all`'s parts (grade_all.py is the command), one concern each:

    export   a Gradescope export, read: its submissions, their submitters, Gradescope's scores
    shards   the K-th of N shares of a class
    run      grading what is not graded yet, one worker per GPU (or --jobs on the CPU)
    table    the CSV: one row per student, beside Gradescope's score
    leaderboard   item 10's shares of copy per submission, ranked: leaderboard.csv and leaderboard.md
"""
