"""Command-line tools: op_coverage and opinfo_runner (operator coverage against CPU), model_zoo
(Hugging Face architectures in every mode) and the worker pool they share."""
