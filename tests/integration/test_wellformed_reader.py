"""The spaCy-tagged form checks on real lines: sentences of the collections' web passages that readers judging
answers blind called unclean (and what is left of them once the headings glued to them are cut off), and Wikipedia
sentences that read well."""

from __future__ import annotations

import pytest

from cast.core.records import Passage, ScoredPassage, Selection
from cast.infra.wellformed import FormReader
from cast.summarize.entity_extractive import SentencePicker

# (sentence, the fault a reader saw)
UNCLEAN = [
    (
        "Galaxy A50's camera is superior Both the Galaxy A50 and Moto G7 take clear and bright photos when "
        "conditions are ideal, as in settings with a lot of even lighting.",
        "heading",
    ),
    ("Spark Some Scents Studies suggest aromatherapy can be a good way to relieve stress.", "heading"),
    (
        "Measurement selection The World Health Organization (WHO) defines obesity as abnormal or excessive fat "
        "accumulation that may impair health.",
        "heading",
    ),
    ("Avoid Criticism: Try and avoid criticising as much as you can.", "heading"),
    (
        "Content Marketing Content marketing is a great digital marketing strategy for startups and small "
        "businesses.",
        "heading",
    ),
    (
        "4 Advantages of reverse osmosis systems Reverse osmosis is a technology used by bottled water and food "
        "manufacturers around the world.",
        "heading",
    ),
    (
        "“Running on an empty stomach increases your endurance” Workouts on an empty stomach are not a good idea "
        "for leisure athletes who want to improve their performance.",
        "quotation",
    ),
    (
        "Bostrom states he personally sees no strong argument as to which of the three trilemma propositions is "
        'the true one: "If (1) is true, then we will almost certainly go extinct before reaching posthumanity.',
        "quotation",
    ),
    ("One of the Largest wholesale textile shop in Doha - Qatar.", "no verb"),
    (
        "Some of the best computer science universities in Canada along with the courses offered, fees, and "
        "eligibility criteria are discussed.",
        "page text",
    ),
]
# (sentence as the passage has it, what of it reads as a sentence)
REPAIRED = [
    (
        "Subsidiary bodies A subsidiary body is a committee that assists the Conference of the Parties.",
        "A subsidiary body is a committee that assists the Conference of the Parties.",
    ),
    (
        "Measurement selection The World Health Organization (WHO) defines obesity as abnormal or excessive fat "
        "accumulation that may impair health.",
        "The World Health Organization (WHO) defines obesity as abnormal or excessive fat accumulation that may "
        "impair health.",
    ),
    (
        "Content Marketing Content marketing is a great digital marketing strategy for startups and small "
        "businesses.",
        "Content marketing is a great digital marketing strategy for startups and small businesses.",
    ),
    (
        "Can feel sticky at first Natural Natural deodorants use baking soda, salt crystals, or essential oils to "
        "combat sweat and odor.",
        "Natural deodorants use baking soda, salt crystals, or essential oils to combat sweat and odor.",
    ),
    (
        "Avoid Criticism: Try and avoid criticising as much as you can.",
        "Try and avoid criticising as much as you can.",
    ),
    (
        "Galaxy A50's camera is superior Both the Galaxy A50 and Moto G7 take clear and bright photos when "
        "conditions are ideal.",
        "Both the Galaxy A50 and Moto G7 take clear and bright photos when conditions are ideal.",
    ),
    (
        "Tip The U.S. Department of Health and Human Services recommends 150 to 300 minutes of moderate exercise "
        "a week.",
        "The U.S. Department of Health and Human Services recommends 150 to 300 minutes of moderate exercise a "
        "week.",
    ),
    (
        "Meatloaf is still on the menu in the Atkins diet 3.",
        "Meatloaf is still on the menu in the Atkins diet 3.",
    ),
    (
        "Here are just a few ways that climate change impacts our everyday lives: Climate Change Is Bad for Our "
        "Health Climate change impacts human health in countless ways.",
        "Climate change impacts human health in countless ways.",
    ),
    (
        "What Should I Buy Android or iPhone Five Points to Decide What You Should Buy iPhone or Android 1.",
        None,
    ),
    (
        "At the Worldwide Developers Conference (WWDC) on June 7, 2010, Apple announced the redesigned iPhone 4.",
        "At the Worldwide Developers Conference (WWDC) on June 7, 2010, Apple announced the redesigned iPhone 4.",
    ),
    # what is left has no verb the tagger sees ("fit" read as an adjective): nothing reads as a sentence
    (
        "Kickboxing: Approximately 700 calories per hour Other types of martial arts, like Muay Thai, fit into this "
        "category too.",
        None,
    ),
    ("One of the Largest wholesale textile shop in Doha - Qatar.", None),
    # a heading whose words the sentence says again in lower case
    (
        "Nigerian Food and Ingredients Nigerian food consists mainly of rice, yam, plantain and beans.",
        "Nigerian food consists mainly of rice, yam, plantain and beans.",
    ),
    (
        "Difference Between Vegan Cheese vs Regular Cheese Traditional cheese is made using casein.",
        "Traditional cheese is made using casein.",
    ),
    (
        "Olive oil One of the most versatile and healthy oils to cook with and eat is olive oil, as long as it’s "
        "extra virgin.",
        "One of the most versatile and healthy oils to cook with and eat is olive oil, as long as it’s extra virgin.",
    ),
    (
        "Breathe Deep Taking a deep breath has been shown to lower cortisol levels.",
        "Taking a deep breath has been shown to lower cortisol levels.",
    ),
    ("Social Media Marketing Everybody uses social media.", "Everybody uses social media."),
    (
        "Nixon Surrenders Nixon's intransigence and outright defiance failed to pay off.",
        "Nixon's intransigence and outright defiance failed to pay off.",
    ),
    (
        "The Great Barrier Reef The Great Barrier Reef is the world’s largest and most beautiful coral reef.",
        "The Great Barrier Reef is the world’s largest and most beautiful coral reef.",
    ),
]
# Sentences that open on names or title case: nothing is cut off them.
NOT_CUT = [
    "The Watergate Scandal brought down the Presidency of Richard Nixon.",
    "Barack Obama Presidential Library opened in 2020.",
    "New York City Marathon runners start on Staten Island.",
    "Marie Skłodowska-Curie (7 November 1867 – 4 July 1934) was a Polish physicist.",
    "Toyota Camry Hybrid models get 52 mpg.",
    "Doctors Without Borders provides care in many countries.",
    "According to the 2010 revison of the World Population Prospects the total population was 65 966 000 in 2010.",
    "The conversion of cellulose I to cellulose II is irreversible, suggesting that cellulose I is metastable.",
    "The apocryphal Acts of Paul and the apocryphal Acts of Peter suggest that Paul survived Rome.",
    "High Speed Doors are made to handle a high number of openings, generally more than 200000 a year.",
    "The collaboration with the American architect Richard Meier made possible the restyle of the hotel.",
    "Developed country Parties should also continue to take the lead in mobilizing climate finance, taking into "
    "account the needs and priorities of developing country Parties.",
    "Marie Curie and Pierre Curie married in 1895.",
    '"Created" and started up in 1963 by Spartaco Vannoni, the Bio Hotel Raphael is a real museum of art.',
]
LEANING = [
    "In my mind, though, depending on what you need, you'll lean one way or the other.",
    "The hotel has been completely refurbished, while retaining aspects that reflect the glorious past of the "
    "Eternal City.",
    "Thanks to his influence on Gibson and Stephenson in particular, Pynchon became one of the progenitors of "
    "cyberpunk fiction.",
    "In the 19th century, the British renamed these as Creek Town, Old Town and Duke Town.",
    "Woodward and Bernstein, however, defended Felt's claims and detailed their relationship with him.",
]
READS_WELL = [
    "Tourism in Nigeria centers largely on events, due to the country's ample amount of ethnic groups, but also "
    "includes rain forests, savannah, waterfalls, and other natural attractions.",
    "Newton was locked out of the studio for his disruption, but a second problem arose: nearby freight train "
    "whistles interrupted the session twice, forcing the recording to start over.",
    "The amount of solar energy reaching Earth's surface decreases with increasing latitude.",
    "Andrew prepared to war against Leopold VI, Duke of Austria, but Ladislaus suddenly died in Vienna on 7 May "
    "1205.",
    "Polonium, also tentatively called radium F, was named after Marie Curie's native land of Poland.",
    "Also tentatively called radium F, polonium was discovered by Marie and Pierre Curie in July 1898.",
]


@pytest.fixture(scope="module")
def reader() -> FormReader:
    return FormReader()


def test_what_readers_called_unclean_is_found(reader):
    forms = reader.read([sentence for sentence, _ in UNCLEAN])
    assert [form.fault for form in forms] == [fault for _, fault in UNCLEAN]


def test_sentences_leaning_on_what_came_before_are_told(reader):
    assert all(form.refers_back for form in reader.read(LEANING))


def test_sentences_that_read_well_stay(reader):
    forms = reader.read(READS_WELL)
    assert [(form.fault, form.refers_back) for form in forms] == [(None, False)] * len(READS_WELL)


def test_a_heading_glued_in_front_is_cut_off_and_what_is_left_read_again(reader):
    repaired = reader.repair([sentence for sentence, _ in REPAIRED])
    assert [
        sentence[part[0] : part[1]] if part else None
        for (sentence, _), part in zip(REPAIRED, repaired, strict=True)
    ] == [kept for _, kept in REPAIRED]
    kept = [
        sentence[part[0] : part[1]] for (sentence, _), part in zip(REPAIRED, repaired, strict=True) if part
    ]
    assert all(form.fault is None for form in reader.read(kept))
    leaning = [
        sentence[part[0] : part[1]]
        for sentence, part in zip(LEANING, reader.repair(LEANING), strict=True)
        if part
    ]
    assert [form.refers_back for form in reader.read(leaning)] == [True] * len(LEANING)


def test_sentences_opening_on_names_are_not_cut(reader):
    assert reader.repair(NOT_CUT) == [(0, len(sentence)) for sentence in NOT_CUT]


def test_the_answers_sentences_are_cut_down_to_what_reads_with_their_own_entities(reader):
    passage = (
        "Subsidiary bodies A subsidiary body is a committee that assists the Conference of the Parties. "
        "It meets twice a year in Bonn. One of the Largest wholesale textile shop in Doha - Qatar. "
        "It sells fabric to visitors from abroad."
    )

    def mention(surface: str, entity: str) -> dict:
        return {
            "surface": surface,
            "start": passage.index(surface),
            "end": passage.index(surface) + len(surface),
            "entity": entity,
        }

    selection = Selection(
        (ScoredPassage(Passage("p1", passage), 1.0),),
        "eg",
        explanation={
            "passage_entities": {
                "p1": [
                    mention("Subsidiary bodies", "Subsidiary_body"),
                    mention("Conference of the Parties", "COP"),
                ]
            }
        },
    )
    # 60 words, entity and novelty weights 0.5, sentences of 3 words or more, no position prior, no filling
    found = SentencePicker(60, 0.5, 0.5, 3, 0.0, False, reader=reader).candidates(selection)
    assert [(c.text, c.entities) for c in found] == [
        ("A subsidiary body is a committee that assists the Conference of the Parties.", frozenset({"COP"})),
        ("It meets twice a year in Bonn.", frozenset()),
        ("It sells fabric to visitors from abroad.", frozenset()),
    ]
    assert all(c.text in passage for c in found)
    # the second follows the first, whose heading only was cut; the third followed a sentence left out
    assert [(c.follows, c.refers_back) for c in found] == [(False, False), (True, True), (False, True)]


def picked_texts(
    reader: FormReader, passages: list[str], relevance: list[float], lead: int = 1, add_share: float = 0.0
) -> list[str]:
    """The answer the picker puts together from the passages' sentences, given their relevance: a lead of up to
    ``lead`` sentences, then any sentence that fits, reads where it stands and is relevant enough."""
    selection = Selection(
        tuple(ScoredPassage(Passage(f"p{n}", text), 1.0) for n, text in enumerate(passages)), "eg"
    )
    # 60 words, no entity, novelty or position weight, sentences of 3 words or more, no filling
    picker = SentencePicker(
        60, 0.0, 0.0, 3, 0.0, False, lead_sentences=lead, add_share=add_share, reader=reader
    )
    return [c.text for c in picker.pick(picker.candidates(selection), {}, relevance)]


def test_a_sentence_the_tagger_reads_as_leaning_back_is_added_only_after_the_one_before_it(reader):
    # "The scandal led ..." names no scandal: where its passage's sentence before it is not in the answer, it is
    # left out, as the form check would call it dangling.
    passages = [
        "Nixon resigned as president on August 9, 1974.",
        "The scandal led to the resignation of Richard Nixon in 1974. Gerald Ford became president after Nixon.",
    ]
    assert picked_texts(reader, passages, [1.0, 0.9, 0.5]) == [
        "Nixon resigned as president on August 9, 1974.",
        "Gerald Ford became president after Nixon.",
    ]


def test_a_sentence_only_the_tagger_reads_as_leaning_back_may_open_the_answer(reader):
    passages = ["The scandal led to the resignation of Richard Nixon in 1974. Nixon resigned on August 9."]
    assert picked_texts(reader, passages, [1.0, 0.1])[0] == (
        "The scandal led to the resignation of Richard Nixon in 1974."
    )


def test_a_sentence_only_the_tagger_reads_as_leaning_back_opens_the_answer_after_the_one_before_it(reader):
    passages = [
        "Nixon's aides ordered the harassment of activist groups and political figures. "
        "The scandal led to the resignation of Richard Nixon in 1974. Ford pardoned Nixon a month later.",
        # 34 words: it fits only without Ford's
        "Watergate " + "was a long affair that " * 6 + "ended in 1974.",
    ]
    # A lead of two sentences counted from the best one on (the sentence read before it for what it leans on is
    # not one of the two): Ford's sentence goes with it, and the other passage's no longer fits the 60 words.
    assert picked_texts(reader, passages, [0.1, 1.0, 0.8, 0.9], lead=2, add_share=0.6) == [
        "Nixon's aides ordered the harassment of activist groups and political figures.",
        "The scandal led to the resignation of Richard Nixon in 1974.",
        "Ford pardoned Nixon a month later.",
    ]


def test_what_a_cut_label_leaves_in_lower_case_is_no_candidate(reader):
    # The reader cuts the label "Official Website Hotel Navona Roma:" off; what is left reads as the rest of a
    # sentence, not as one.
    passage = (
        "Hotel Navona 3 Stars Rome Historic Centre | Official Website Hotel Navona Roma: a stay in the heart of the "
        "historic centre near Piazza Navona Situated in the heart of the historic centre, Hotel Navona Roma enjoys "
        "a privileged position only a few steps from Piazza Navona. The hotel has been completely refurbished."
    )
    selection = Selection((ScoredPassage(Passage("p1", passage), 1.0),), "eg")
    found = SentencePicker(60, 0.0, 0.0, 3, 0.0, False, reader=reader).candidates(selection)
    assert [(c.text, c.follows) for c in found] == [("The hotel has been completely refurbished.", False)]
