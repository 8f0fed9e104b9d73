"""The benchmarks as a library, the same one the scripts of ``bench/`` call: the pooled development benchmark's
datasets (:mod:`cast.benchmark.datasets`); answering them with a pipeline, scoring them turn by turn and testing
the scores against a baseline with significance (:mod:`cast.benchmark.pooled`); the judged sample's sheets
(:mod:`cast.benchmark.judged`); the stages a study builds from specs (:mod:`cast.benchmark.stages`); and the
scripts' plumbing (:mod:`cast.benchmark.scripts`)."""
