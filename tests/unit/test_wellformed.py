"""What a reader would not call a sentence, what is left of one once the heading glued to it is cut off, and
sentences leaning on what came before, on hand-tagged words (the tagger itself:
tests/integration/test_wellformed_reader.py)."""

from __future__ import annotations

from typing import NamedTuple

from cast.infra.wellformed import refers_back, said_again, sentence_fault, sentence_part, title_end


class Word(NamedTuple):
    text: str
    tag_: str
    idx: int


def tagged(*pairs: str) -> tuple[list[Word], str]:
    """Words given as ``word/TAG``, joined by spaces, and their text."""
    words, at = [], 0
    for pair in pairs:
        text, tag = pair.rsplit("/", 1)
        words.append(Word(text, tag, at))
        at += len(text) + 1
    return words, " ".join(w.text for w in words)


def test_a_heading_glued_to_a_sentence_is_no_sentence():
    # "Both" capitalised after "superior": the next sentence starts with no stop between
    glued = tagged(
        "camera/NN", "is/VBZ", "superior/JJ", "Both/CC", "the/DT", "phones/NNS", "take/VBP", "photos/NNS"
    )
    assert sentence_fault(*glued) == "heading"
    # a name is no heading: "Will" is followed by a capitalised word, "in" joins "The" to its title
    name = tagged("She/PRP", "met/VBD", "Will/NNP", "Benteen/NNP", "in/IN", "The/DT", "Hague/NNP", "./.")
    assert sentence_fault(*name) is None
    label = tagged("Avoid/VB", "Criticism:/NN", "Try/VB", "and/CC", "avoid/VB", "it/PRP", "./.")
    assert sentence_fault(*label) == "heading"
    said_twice = tagged(
        "Content/NNP", "Marketing/NNP", "Content/NNP", "marketing/NN", "is/VBZ", "great/JJ", "./."
    )
    assert sentence_fault(*said_twice) == "heading"


def test_quotations_verbless_lines_and_page_text_are_no_sentences():
    quoted = tagged(
        '"Running/VBG', 'helps"/VBZ', "Workouts/NNS", "on/IN", "an/DT", "empty/JJ", "stomach/NN", "fail/VBP"
    )
    assert sentence_fault(*quoted) == "quotation"
    opened = tagged("He/PRP", "said/VBD", ",/,", '"I/PRP', "love/VBP", "deadlines/NNS", "./.")
    assert sentence_fault(*opened) == "quotation"
    assert sentence_fault(
        *tagged("One/CD", "of/IN", "the/DT", "largest/JJS", "shops/NNS", "in/IN", "Doha/NNP")
    ) == ("no verb")
    meta = tagged("The/DT", "best/JJS", "courses/NNS", "are/VBP", "discussed/VBN", "./.")
    assert sentence_fault(*meta) == "page text"


def test_what_leans_on_what_came_before():
    assert refers_back(*tagged("The/DT", "hotel/NN", "has/VBZ", "been/VBN", "refurbished/VBN", "./."))
    # a definite noun that says which is no reference
    assert not refers_back(
        *tagged("The/DT", "amount/NN", "of/IN", "solar/JJ", "energy/NN", "decreases/VBZ", "./.")
    )
    assert refers_back(
        *tagged("Unfortunately/RB", "for/IN", "Nixon/NNP", ",/,", "the/DT", "equipment/NN", "was/VBD")
    )
    assert refers_back(
        *tagged("Thanks/NNS", "to/IN", "his/PRP$", "influence/NN", ",/,", "Pynchon/NNP", "became/VBD")
    )
    assert not refers_back(
        *tagged("Most/JJS", "architects/NNS", "design/VBP", "their/PRP$", "buildings/NNS", "./.")
    )
    assert refers_back(
        *tagged("In/IN", "my/PRP$", "mind/NN", ",/,", "though/RB", ",/,", "you/PRP", "lean/VBP")
    )
    assert refers_back(
        *tagged("The/DT", "British/NNPS", "renamed/VBD", "these/DT", "as/IN", "Duke/NNP", "Town/NNP")
    )
    assert not refers_back(
        *tagged("Take/VB", "a/DT", "look/NN", "at/IN", "these/DT", "key/JJ", "things/NNS", "./.")
    )


def kept(words: list[Word], text: str) -> str | None:
    """What :func:`sentence_part` keeps of ``text``."""
    part = sentence_part(words, text)
    return None if part is None else text[part[0] : part[1]]


def test_a_heading_or_a_label_glued_in_front_is_cut_off():
    subsidiary = tagged(
        "Subsidiary/JJ", "bodies/NNS", "A/DT", "subsidiary/JJ", "body/NN", "is/VBZ", "a/DT", "committee./NN"
    )
    assert kept(*subsidiary) == "A subsidiary body is a committee."
    label = tagged("Avoid/VB", "Criticism:/NN", "Try/VB", "and/CC", "avoid/VB", "it./PRP")
    assert kept(*label) == "Try and avoid it."
    said_twice = tagged("Content/NNP", "Marketing/NNP", "Content/NNP", "marketing/NN", "is/VBZ", "great./JJ")
    assert kept(*said_twice) == "Content marketing is great."


def test_the_sentence_after_the_last_glue_point_is_kept():
    # "Natural" said twice inside: what comes before it ends on no stop (a caption, then a heading)
    inside = tagged(
        *"Can/MD feel/VB sticky/JJ at/IN first/RB Natural/NNP Natural/NNP deodorants/NNS use/VBP oils./NNS".split()
    )
    assert kept(*inside) == "Natural deodorants use oils."
    # a label, then a heading ("Approximately 700 calories per hour"), then the sentence
    between = tagged(
        *"Kickboxing:/NN Approximately/RB 700/CD calories/NNS per/IN hour/NN Other/JJ arts/NNS fit/VBP too./RB".split()
    )
    assert kept(*between) == "Other arts fit too."


def test_a_title_case_heading_carried_on_by_a_preposition_or_a_verb_is_cut_off_whole():
    jollof = tagged(
        *"Key/JJ Ingredients/NNS In/IN Jollof/NNP Rice/NNP Jollof/NNP rice/NN is/VBZ made/VBN with/IN rice./NN".split()
    )
    assert kept(*jollof) == "Jollof rice is made with rice."
    health = tagged(
        *"Climate/NNP Change/NNP Is/VBZ Bad/JJ for/IN Our/PRP$ Health/NNP Climate/NN change/NN impacts/VBZ health./NN".split()
    )
    assert kept(*health) == "Climate change impacts health."
    # a preposition opening the sentence after the heading stays
    argument = tagged(
        "The/DT", "simulation/NN", "argument/NN", "In/IN", "2003,/CD", "Bostrom/NNP", "wrote./VBD"
    )
    assert kept(*argument) == "In 2003, Bostrom wrote."
    # the heading runs into what is no sentence's start: nothing is left to read
    museums = tagged(
        *"Relive/VB The/DT History/NN Of/IN Doha/NNP Museums/NNPS in/IN Doha/NNP One/CD of/IN the/DT finest/JJS places./NNS".split()
    )
    assert kept(*museums) is None


def test_a_heading_whose_words_the_sentence_says_again_in_lower_case_is_cut_off():
    nigerian = tagged(
        *"Nigerian/NNP Food/NNP and/CC Ingredients/NNPS Nigerian/JJ food/NN consists/VBZ of/IN rice./NN".split()
    )
    assert kept(*nigerian) == "Nigerian food consists of rice."
    cheese = tagged(
        *"Cheese/NN vs/IN Regular/NNP Cheese/NNP Traditional/JJ cheese/NN is/VBZ made/VBN using/VBG casein./NN".split()
    )
    assert kept(*cheese) == "Traditional cheese is made using casein."
    # a heading in sentence case, said again after the verb
    olive = tagged(*"Olive/JJ oil/NN One/CD of/IN the/DT best/JJS is/VBZ olive/JJ oil./NN".split())
    assert kept(*olive) == "One of the best is olive oil."
    breathe = tagged(*"Breathe/NNP Deep/NNP Taking/VBG a/DT deep/JJ breath/NN helps./VBZ".split())
    assert kept(*breathe) == "Taking a deep breath helps."
    # an indefinite pronoun capitalised after a word opens the sentence, unless a name goes on ("Everybody Loves")
    social = tagged(*"Social/NNP Media/NNP Marketing/NNP Everybody/NNP uses/VBZ social/JJ media./NNS".split())
    assert kept(*social) == "Everybody uses social media."
    show = tagged(*"She/PRP watched/VBD Everybody/NNP Loves/NNP Raymond./NNP".split())
    assert kept(*show) == "She watched Everybody Loves Raymond."


def test_names_and_phrases_said_again_are_no_headings():
    # a name's words are capitalised wherever they are said
    marathon = tagged(
        *"New/NNP York/NNP City/NNP Marathon/NNP runners/NNS start/VBP in/IN New/NNP York./NNP".split()
    )
    assert said_again(marathon[0]) is None
    # the tagger reads "Telescope" as a name: it goes on the name before it
    hubble = tagged(*"The/DT Hubble/NNP Space/NNP Telescope/NNP observes/VBZ space./NN".split())
    assert said_again(hubble[0]) is None
    # after a determiner or an adjective, a capitalised word goes on the phrase
    architect = tagged(
        *"The/DT collaboration/NN with/IN the/DT American/JJ architect/NN made/VBD the/DT collaboration./NN".split()
    )
    assert said_again(architect[0]) is None
    # a capitalised common noun after a capitalised word goes on its name; one followed by "of" is no subject
    prospects = tagged(
        *"World/NNP Population/NNP Prospects/NNS the/DT total/JJ population/NN was/VBD 65,966,000./CD".split()
    )
    assert said_again(prospects[0]) is None
    # a common noun the sentence capitalises wherever it says it is a name
    parties = tagged(
        *"Developed/VBN country/NN Parties/NNS should/MD help/VB developing/VBG country/NN Parties/NNS ./.".split()
    )
    assert said_again(parties[0]) is None
    acts = tagged(
        *"The/DT apocryphal/NN Acts/NNS of/IN Paul/NNP and/CC the/DT apocryphal/JJ Acts./NNS".split()
    )
    assert said_again(acts[0]) is None
    # a heading ends at a finite verb: what follows is the sentence's own
    verb = tagged(*"Cheese/NN is/VBZ made/VBN Traditional/JJ cheese/NN lasts./VBZ".split())
    assert said_again(verb[0]) is None


def test_a_title_naming_the_subject_is_no_heading():
    doctors = tagged(*"Doctors/NNS Without/IN Borders/NNP provides/VBZ care./NN".split())
    assert kept(*doctors) == "Doctors Without Borders provides care."
    # a conjunction opens a clause, whatever follows it: the heading before it stays found
    nation = tagged(*"The/DT Nation/NNP Reacts/VBZ While/IN Nixon/NNP thought/VBD so./RB".split())
    assert sentence_fault(*nation) == "heading"


def test_where_title_case_words_end():
    assert title_end("x Should Buy iPhone or Android Most phones last", 2) == len(
        "x Should Buy iPhone or Android "
    )
    assert title_end("x At the Worldwide Conference (WWDC) Apple spoke", 2) == 2
    assert title_end("x In Nigeria, eating out is common", 2) is None
    assert title_end("x Is", 2) == 2


def test_a_number_at_the_end_stays():
    # a list's next number is kept: without it the sentence would end on no stop, read as cut off
    listed = tagged("Meatloaf/NN", "is/VBZ", "on/IN", "the/DT", "menu/NN", "3./CD")
    assert kept(*listed) == "Meatloaf is on the menu 3."
    named = tagged("Apple/NNP", "announced/VBD", "the/DT", "iPhone/NNP", "4./CD")
    assert kept(*named) == "Apple announced the iPhone 4."
    aged = tagged("He/PRP", "retired/VBD", "at/IN", "the/DT", "age/NN", "of/IN", "12./CD")
    assert kept(*aged) == "He retired at the age of 12."
    name = tagged("She/PRP", "met/VBD", "Will/NNP", "Benteen/NNP", "in/IN", "The/DT", "Hague./NNP")
    assert kept(*name) == "She met Will Benteen in The Hague."
