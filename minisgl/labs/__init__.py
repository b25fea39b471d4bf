"""Labs: write one component of the engine, run the real engine with it, and compare its trace with the
reference trace, event by event.

    minisgl lab list | start NAME | test NAME | grade NAME | hint NAME | status | reset NAME

components.py  what a learner may replace, and where the engine looks each one up
swap.py        the one switch: MINISGL_LAB=COMPONENT=FILE, read at start-up by every engine process
catalog/       cards.py (every lab's card and hints), and one folder per lab: the starter file, its unit
               tests, README.md
"""
