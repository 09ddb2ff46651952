"""ui.cache._StepBar: the text of the evaluation's progress bar (step, message, ETA)."""

from ui import cache


class Slot:
    def __init__(self):
        self.shown = []

    def progress(self, value, text=""):
        self.shown.append((round(value, 3), text))

    def empty(self):
        self.shown.append(None)


def bar_at(seconds: float):
    bar = cache._StepBar("Ontology tasks", "loading the models…")
    bar.slot, bar.started, bar._clock = Slot(), 0.0, lambda: seconds
    return bar


def test_step_message_and_eta_from_the_time_per_step_so_far():
    bar = bar_at(30.0)
    bar(1.0, 4, "minilm: Hypernym detection")
    assert bar.slot.shown[-1] == (0.25, "Ontology tasks: step 2 of 4 · minilm: Hypernym detection · about 2 min left")
    bar = bar_at(60.0)
    bar(0.5, 4, "run: encoding 6,500 names")
    assert bar.slot.shown[-1][1].endswith("step 1 of 4 · run: encoding 6,500 names · about 7 min left")


def test_no_eta_before_a_second_or_when_done():
    bar = bar_at(0.5)
    bar(1.0, 4, "a")
    assert "left" not in bar.slot.shown[-1][1]
    bar = bar_at(10.0)
    bar(4.0, 4, "done")
    assert bar.slot.shown[-1] == (1.0, "Ontology tasks: step 4 of 4 · done")
