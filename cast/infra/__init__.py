"""Infrastructure the stages share: the JVM, the cache, model loading and decoding, the sentence encoder, chat clients, Ray."""
