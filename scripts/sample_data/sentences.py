"""A small seeded grammar that writes the project's own English text for the offline sample data.

`Writer(rng)` fills sentence templates with words from `lexicon` (inflected here),
invented names built from syllables, numbers, dates and units. Everything it returns is a pure
function of the `random.Random` it was given, so the sample files regenerate identically.
`wikify` re-spaces a sentence the way wikitext-103-raw tokenizes it (` , `, ` @-@ `, ` @,@ `).
"""

from __future__ import annotations

import random
import re

from scripts.sample_data import lexicon as lex

IRREGULAR_PLURALS = {
    "mitochondrion": "mitochondria",
    "bacterium": "bacteria",
    "fungus": "fungi",
    "larva": "larvae",
    "nucleus": "nuclei",
    "spectrum": "spectra",
    "analysis": "analyses",
    "thesis": "theses",
    "child": "children",
    "person": "people",
    "leaf": "leaves",
    "knife": "knives",
    "shelf": "shelves",
    "sheep": "sheep",
    "cattle": "cattle",
    "hay": "hay",
    "axis": "axes",
    "criterion": "criteria",
    "vertebra": "vertebrae",
    "formula": "formulas",
    "quiz": "quizzes",
}
IRREGULAR_VERBS = {  # base: (past, past participle)
    "write": ("wrote", "written"),
    "grow": ("grew", "grown"),
    "build": ("built", "built"),
    "breed": ("bred", "bred"),
    "feed": ("fed", "fed"),
    "find": ("found", "found"),
    "make": ("made", "made"),
    "take": ("took", "taken"),
    "choose": ("chose", "chosen"),
    "shine": ("shone", "shone"),
    "sing": ("sang", "sung"),
    "teach": ("taught", "taught"),
    "learn": ("learned", "learned"),
    "hold": ("held", "held"),
    "freeze": ("froze", "frozen"),
    "forget": ("forgot", "forgotten"),
    "bleed": ("bled", "bled"),
    "swim": ("swam", "swum"),
    "rule": ("ruled", "ruled"),
    "sow": ("sowed", "sown"),
    "draw": ("drew", "drawn"),
    "rise": ("rose", "risen"),
    "lend": ("lent", "lent"),
    "spend": ("spent", "spent"),
    "feel": ("felt", "felt"),
    "keep": ("kept", "kept"),
    "shear": ("sheared", "shorn"),
    "fold": ("folded", "folded"),
    "sue": ("sued", "sued"),
    "sweep": ("swept", "swept"),
    "bring": ("brought", "brought"),
    "leave": ("left", "left"),
    "know": ("knew", "known"),
    "speak": ("spoke", "spoken"),
    "begin": ("began", "begun"),
}
DOUBLING_VERBS = {
    "stop",
    "plan",
    "drop",
    "ship",
    "commit",
    "hum",
    "strum",
    "fit",
    "grab",
    "admit",
    "refer",
    "trek",
    "chop",
    "map",
    "trim",
    "wrap",
    "tap",
    "stir",
    "dig",
    "spin",
    "swim",
    "begin",
    "forget",
    "dip",
    "jog",
    "skim",
}
VOWELS = "aeiou"
ROMAN = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]


def plural(noun: str) -> str:
    head, _, last = noun.rpartition(" ")
    if last in IRREGULAR_PLURALS:
        out = IRREGULAR_PLURALS[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        out = last + "es"
    elif last.endswith("y") and last[-2:-1] not in VOWELS:
        out = last[:-1] + "ies"
    else:
        out = last + "s"
    return f"{head} {out}" if head else out


def verb_s(v: str) -> str:
    if v.endswith(("s", "x", "z", "ch", "sh", "o")):
        return v + "es"
    if v.endswith("y") and v[-2] not in VOWELS:
        return v[:-1] + "ies"
    return v + "s"


def verb_ed(v: str, participle: bool = False) -> str:
    if v in IRREGULAR_VERBS:
        return IRREGULAR_VERBS[v][1 if participle else 0]
    if v in DOUBLING_VERBS:
        return v + v[-1] + "ed"
    if v.endswith("e"):
        return v + "d"
    if v.endswith("y") and v[-2] not in VOWELS:
        return v[:-1] + "ied"
    return v + "ed"


def verb_ing(v: str) -> str:
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v in DOUBLING_VERBS:
        return v + v[-1] + "ing"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")):
        return v[:-1] + "ing"
    return v + "ing"


def roman(n: int) -> str:
    out = []
    for value, sym in ROMAN:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def fix_articles(text: str) -> str:
    """'a apple' -> 'an apple' by first letter, minus the 'you'/'one' sounds (useful, unit, one)."""
    return re.sub(r"\b([Aa]) (?=[aeiouAEIOU])(?!(?:[Uu](?:ni|s|ti|r[aeiou])|[Ee]u|[Oo]ne))", r"\1n ", text)


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def title_case(s: str) -> str:
    small = {"a", "an", "the", "of", "and", "in", "on", "to", "for", "at", "by", "with"}
    words = s.split(" ")
    return " ".join(w if (i and w in small) else cap(w) for i, w in enumerate(words))


def _words(s: str) -> list[str]:
    return [w.replace("_", " ") for w in s.split()]


TOPIC_NAMES = sorted(lex.TOPICS)
LEXICON = {t: {k: (v.split("|") if k == "fields" else _words(v)) for k, v in d.items()} for t, d in lex.TOPICS.items()}


class Names:
    """Pools of invented people, places and institutions, drawn once from the rng."""

    def __init__(self, rng: random.Random, n_first=3_000, n_last=5_000, n_places=4_000, n_terms=1_000):
        self.rng = rng
        self.first = self._pool(n_first, self._first_name)
        self.last = self._pool(n_last, self._surname)
        self.places = self._pool(n_places, self._place)
        self.terms = self._pool(n_terms, lambda: rng.choice(lex.TERM_ROOTS) + rng.choice(lex.TERM_SUFFIXES))
        self.countries = self._pool(60, lambda: self._stem(2) + rng.choice(["ia", "land", "ora", "istan", "esh"]))

    def _pool(self, n, make) -> list[str]:
        """`n` distinct outputs of `make`, in first-drawn order (fails loudly if it cannot make them)."""
        seen: dict[str, None] = {}
        for _ in range(n * 50):
            seen[make()] = None
            if len(seen) == n:
                return list(seen)
        raise ValueError(f"name pool: only {len(seen):,} distinct values, asked for {n:,}")

    def _stem(self, syllables: int) -> str:
        r = self.rng
        parts = [
            r.choice(lex.NAME_ONSETS) + r.choice(lex.NAME_VOWELS) + r.choice(lex.NAME_CODAS) for _ in range(syllables)
        ]
        s = "".join(parts)
        if r.random() < 0.04:
            i = r.randrange(len(s))
            s = s[:i] + r.choice(lex.NAME_ACCENTED) + s[i + 1 :]
        return cap(s)

    def _first_name(self) -> str:
        return self._stem(self.rng.choice([1, 2, 2, 2]))

    def _surname(self) -> str:
        stem = self._stem(self.rng.choice([1, 1, 2]))
        return stem + self.rng.choice(lex.SURNAME_ENDINGS) if self.rng.random() < 0.6 else stem

    def _place(self) -> str:
        return self._stem(self.rng.choice([1, 1, 2])) + self.rng.choice(lex.PLACE_ENDINGS)

    def person(self) -> str:
        r = self.rng
        name = f"{r.choice(self.first)} {r.choice(self.last)}"
        return f"{r.choice(self.first)[0]}. {name}" if r.random() < 0.08 else name

    def org(self, field: str) -> str:
        r = self.rng
        kind = r.choice(["Institute of", "Society for", "Museum of", "School of", "Centre for"])
        return r.choice(
            [
                f"{r.choice(self.places)} {kind} {title_case(field)}",
                f"{r.choice(self.last)} {kind} {title_case(field)}",
                f"University of {r.choice(self.places)}",
            ]
        )


EXPOSITORY = [
    "Most {ns} {v} {adv} when the {n} is {a}.",
    "A {a} {n} {vs} the {n2} by {vg} its {ns}.",
    "{Roles} often {gv} the {n} to {gv2} how {ns} {v}.",
    "The {n} is one of the most {ga} {gns} in {field}.",
    "In {field}, a {n} is a {ga} {gn} that {vs} {ns}.",
    "When {ns} {v}, the {n} {adv} becomes {a}.",
    "A {role} named {person} first {gvd} this {gn} in {year}.",
    "Around {pct} of the {ns} in {place} are {a}.",
    "The typical {n} measures about {qty}.",
    "Because the {n} is {a}, it {adv} {vs} nearby {ns}.",
    "Students of {field} learn to {gv} {ns} and to {v} each {n2}.",
    "One {ga} way to {gv} a {n} is to {v} it {adv}.",
    "{Ns} and {ns2} are not the same: the former {v}, while the latter {v2}.",
    "If you {v} a {n} too {adv}, it may become {a}.",
    "Without {ns}, the {n} could not {v}.",
    "Researchers at the {org} {gvd} {num} {ns} over {dur}.",
    "What makes a {n} {a}? The answer lies in how its {ns} {v}.",
    "{Conn} the {n} {vs} only when {ns} are present.",
    "This {gn} explains why {ns} {v} in {a} conditions.",
    "By {year}, {roles} in {place} had {vn} more than {num} {ns}.",
    'The word "{n}" comes from an older term used by {roles}.',
    "You can {gv} this yourself: take a {n}, {v} it, and {gv2} what happens to the {n2}.",
    "Each {n} contains a {a} {n2} and several {a2} {ns}.",
    "{Ns} {v} best at about {qty}.",
    "The first {a} {n} was {vn} by {person} in {year}, during a {ga} {gn}.",
    "Many {roles} argue that the {n} is more {ga} than the {n2}.",
    "Over {num} {ns} have been {vn} in the {place} region since {year}.",
    "Note that a {n} is not always {a}; sometimes it is simply {ga}.",
    "Think of a {n} as a kind of {object}: it {vs} the {ns} around it.",
    "First the {n} {vs}, then the {n2} {vs2}, and finally the {n3} {vs3}.",
    "{Conn} {roles} use {ns} to {v} {ns2}.",
    "In {month} {year}, {person} of {place} {gvd} a {a} {n}.",
    "Why do {ns} {v}? Mostly because the {n} is {a}.",
    "A simple rule of thumb: {v} the {n} before you {v2} the {n2}.",
    "The {n} of a {n2} is usually {a} and {a2}.",
    "These {gns} help {roles} {gv} {a} {ns}.",
    "Early {roles} believed that {ns} {v} because of a {a} {n}.",
    "There are at least {small} kinds of {n}: {list}.",
    "Unlike a {n}, a {n2} {vs} without any {ns}.",
    "The {n} {vs} {adv}, so it is {ga} to {gv} it.",
    "{Conn} a {ga} {n} can {v} as many as {num} {ns} in a single {gn}.",
    "The {a} {ns} of {place} were {vn} by {roles} from the {org}.",
    "It is {ga} to confuse a {n} with a {n2}, but the two {v} in {ga2} ways.",
    "{Conn} nobody knows exactly why the {n} {vs}, although several {gns} have been proposed.",
    "A {n} that {vs} {adv} is called {a}, and one that does not is called {a2}.",
    "{Person} once wrote that every {role} should {gv} a {n} at least once.",
    "The {n} usually takes about {dur} to {v}, and the result is {a}.",
    "{Conn} the {a} {n} has become a {ga} {gn} for {roles} everywhere.",
]

PAST = [
    "In {year}, {person} {gvd} the {n} at {place}.",
    "The {org} was founded in {year} by {person}.",
    "During the {decade}, {roles} from {place} {gvd} {num} {ns}.",
    "The {n} was {vn} in {year} and {gvd} again in {year2}.",
    "{Person} was born in {place} on {date}.",
    "After moving to {place} in {year}, {person} worked as a {role}.",
    "The town of {place} grew {adv} after a {a} {n} was {vn} nearby.",
    "In {month} {year}, a {ga} {gn} {gvd} much of {place}.",
    "{Person} and {person2} {gvd} the {n} together until {year}.",
    "The {n} was later given to the {org}, where it remains.",
    "By the {decade}, the population of {place} had reached {bignum}.",
    "{Person} {gvd} {num} {ns} between {span}.",
    "The {a} {n} of {place} was first described in {year}.",
    "Local {roles} {gvd} the {n} for nearly {small} decades.",
    "A {ga} {gn} in {year} forced the {roles} of {place} to {gv} their {ns}.",
    "{Person} received the {place} Prize for {title} in {year}.",
    "The {n} was {vn} on {date}, at a cost of about {money}.",
    "It was the largest {n} in {country} until {year}.",
    "In the {decade}, a {a} {n} was built between {place} and {place2}.",
    "{Person} later recalled that the {n} had been {ga} from the start.",
]


class Writer:
    """Sentences, paragraphs and small text pieces from templates; one rng drives everything."""

    def __init__(self, rng: random.Random, names: Names | None = None):
        self.rng = rng
        self.names = names or Names(rng)

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def topic(self) -> str:
        return self.pick(TOPIC_NAMES)

    def _lex(self, topic: str) -> dict:
        if self.rng.random() < 0.12:
            topic = self.topic()
        return LEXICON[topic]

    # ---- numbers, dates, quantities
    def year(self) -> int:
        return self.rng.choice(
            [self.rng.randint(1500, 1899), self.rng.randint(1900, 2023), self.rng.randint(1900, 2023)]
        )

    def number(self, hi: int = 900) -> str:
        return f"{self.rng.randint(3, hi):,}"

    def date(self) -> str:
        return f"{self.rng.randint(1, 28)} {self.pick(lex.MONTHS)} {self.year()}"

    def quantity(self) -> str:
        unit, lo, hi, dec = self.pick(lex.UNITS)
        value = self.rng.uniform(lo, hi)
        text = f"{value:,.{dec}f}" if dec else f"{round(value):,}"
        return f"{text}{unit}" if unit in ("%", "°C") else f"{text} {unit}"

    def span(self) -> str:
        a = self.year()
        return f"{a} and {a + self.rng.randint(1, 40)}"

    def duration(self) -> str:
        n = self.rng.randint(2, 60)
        return f"{n} {self.pick(['minutes', 'hours', 'days', 'weeks', 'months', 'years'])}"

    def money(self) -> str:
        return self.pick(["£", "$", "€"]) + f"{self.rng.randint(2, 900) * 1000:,}"

    def noun_list(self, topic: str, k: int) -> str:
        items = self.rng.sample(LEXICON[topic]["nouns"], k)
        return ", ".join(plural(x) for x in items[:-1]) + f" and {plural(items[-1])}"

    def noun(self, lx: dict) -> str:
        """A topic noun; now and then a coined term ("chronolith") or a compound ("cell-based fern")."""
        r = self.rng.random()
        if r < 0.08:
            return self.pick(self.names.terms)
        if r < 0.12:
            return self.pick(lx["nouns"]).split()[-1] + self.pick(lex.NOUN_SUFFIXES) + " " + self.pick(lx["nouns"])
        return self.pick(lx["nouns"])

    def adj(self, lx: dict) -> str:
        """A topic adjective, sometimes with a prefix ("semi-aquatic", "overcautious")."""
        a = self.pick(lx["adjs"])
        return self.pick(lex.DERIVING_PREFIXES) + a if self.rng.random() < 0.12 and "-" not in a else a

    def slot(self, name: str, topic: str) -> str:
        base = name.rstrip("23")
        lx = self._lex(topic) if base in ("n", "ns", "a", "v", "vs", "vd", "vn", "vg") else LEXICON[topic]
        r = self.rng
        table = {
            "n": lambda: self.noun(lx),
            "ns": lambda: plural(self.noun(lx)),
            "a": lambda: self.adj(lx),
            "v": lambda: self.pick(lx["verbs"]),
            "vs": lambda: verb_s(self.pick(lx["verbs"])),
            "vd": lambda: verb_ed(self.pick(lx["verbs"])),
            "vn": lambda: verb_ed(self.pick(lx["verbs"]), participle=True),
            "vg": lambda: verb_ing(self.pick(lx["verbs"])),
            "gn": lambda: self.pick(lex.GENERAL_NOUNS),
            "gns": lambda: plural(self.pick(lex.GENERAL_NOUNS)),
            "ga": lambda: self.pick(lex.GENERAL_ADJS),
            "gv": lambda: self.pick(lex.GENERAL_VERBS),
            "gvd": lambda: verb_ed(self.pick(lex.GENERAL_VERBS)),
            "adv": lambda: self.pick(lex.ADVERBS),
            "role": lambda: self.pick(lx["roles"]).replace("_", " "),
            "roles": lambda: plural(self.pick(lx["roles"]).replace("_", " ")),
            "field": lambda: self.pick(lx["fields"]),
            "person": self.names.person,
            "surname": lambda: self.pick(self.names.last),
            "place": lambda: self.pick(self.names.places),
            "country": lambda: self.pick(self.names.countries),
            "org": lambda: self.names.org(self.pick(lx["fields"])),
            "year": lambda: str(self.year()),
            "decade": lambda: f"{r.randint(150, 201) * 10}s",
            "span": self.span,
            "dur": self.duration,
            "num": self.number,
            "qty": self.quantity,
            "bignum": lambda: f"{r.randint(800, 2_500_000):,}",
            "pct": lambda: f"{r.randint(2, 98)}%",
            "date": self.date,
            "month": lambda: self.pick(lex.MONTHS),
            "small": lambda: self.pick(["two", "three", "four", "five", "six"]),
            "money": self.money,
            "object": lambda: self.pick(lex.OBJECTS),
            "animal": lambda: self.pick(lex.ANIMALS),
            "colour": lambda: self.pick(lex.COLOURS),
            "conn": lambda: self.pick(lex.CONNECTORS),
            "list": lambda: self.noun_list(topic, 3),
            "title": lambda: title_case(self.pick(lx["fields"])),
        }
        if base in table:
            return table[base]()
        if base[:1].isupper():  # {Ns}, {Roles}, {Person}, {Conn}: capitalized variant
            return cap(self.slot(base[0].lower() + base[1:], topic))
        raise KeyError(f"unknown template slot {{{name}}}")

    def fill(self, template: str, topic: str) -> str:
        used: set[str] = set()

        def draw(m: re.Match) -> str:  # avoid "eras and eras": redraw a value already used here
            for _ in range(4):
                value = self.slot(m.group(1), topic)
                if value not in used:
                    break
            used.add(value)
            return value

        return fix_articles(cap(re.sub(r"\{(\w+)\}", draw, template)))

    def sentence(self, topic: str, past: bool = False) -> str:
        return self.fill(self.pick(PAST if past else EXPOSITORY), topic)

    def paragraph(self, topic: str, n: int | None = None, past_frac: float = 0.15) -> str:
        n = n or self.rng.randint(3, 8)
        return " ".join(self.sentence(topic, past=self.rng.random() < past_frac) for _ in range(n))

    def title(self, topic: str) -> str:
        t = self.pick(
            [
                "How {ns} {v}",
                "Understanding the {n}",
                "An Introduction to {field}",
                "{Ns} and {ns2}",
                "Why {ns} Matter",
                "The {a} {n}: A Beginner's Guide",
                "Lesson {small}: {Ns} in {field}",
                "What Every Student Should Know About {ns}",
                "{Field} for Curious Readers",
                "Ten Facts About the {n}",
                "A Short History of the {n}",
                "{Ns} in {place}",
            ]
        )
        return title_case(re.sub(r"\{(\w+)\}", lambda m: self.slot(m.group(1), topic), t))


def wikify(text: str) -> str:
    """Space out punctuation the way wikitext-103-raw does: 'a 1,200-km road, (c.)' style."""
    text = re.sub(r"(\d),(?=\d)", "\\1\x00", text)  # protect 1,200 and 3.5 from punctuation spacing
    text = re.sub(r"(\d)\.(?=\d)", "\\1\x01", text)
    text = re.sub(r"(\w)-(?=\w)", "\\1\x02", text)
    text = re.sub(r"(\w)'s\b", r"\1 's", text)
    text = re.sub(r"([,;:()\"?!%])", r" \1 ", text)
    text = re.sub(r"\.(\s|$)", r" .\1", text)
    text = text.replace("\x00", " @,@ ").replace("\x01", " @.@ ").replace("\x02", " @-@ ")
    return re.sub(r" {2,}", " ", text).strip()
