"""Training the models the toolkit ships (``cast train``): the term selector, the Wikipedia linker's decision and the sentence scorer; each writes the JSON model file its stage reads."""
