"""standarderror: uncertainty for language models, measured on a model you hold."""
__version__ = "0.1.0"
