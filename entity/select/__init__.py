"""Passage selection (step 6 of the pipeline): O, ER and EG, and the paper's formulas they use."""
