"""The item analysis' default settings, apart from its numerics so that the command line's parser
(``benchcert items --help``) reads them without importing numpy or scipy."""

#: The false discovery rate level of the broken-key flags unless asked otherwise.
DEFAULT_FDR = 0.10
#: The tolerance of the reduced set unless asked otherwise: every model's score and every pairwise gap.
DEFAULT_TOLERANCE = 0.02
