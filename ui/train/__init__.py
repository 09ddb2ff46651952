"""The Train page's parts (app_pages/1_Train.py): its forms, the job panel, the run list.

- :mod:`ui.train.option_widgets`: one widget per config option, from its metadata;
- :mod:`ui.train.few_shot_form`, :mod:`ui.train.pretrain_form`: the two forms;
- :mod:`ui.train.job_panel`: the job table and the selected job (status, actions, figures, log);
- :mod:`ui.train.polling`: when the job panel refreshes itself, and when the whole page must;
- :mod:`ui.train.runs_panel`: the run list, its names and stored evaluations;
- :mod:`ui.train.tables`, :mod:`ui.train.executor_info`: the score format, where jobs run.
"""
