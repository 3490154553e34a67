"""`python -m torch_tpu.tools.model_zoo`: the command line (cli.main), also what each worker
process runs with --worker."""
from torch_tpu.tools.model_zoo.cli import main

main()
