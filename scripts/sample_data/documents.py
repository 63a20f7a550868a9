"""Whole documents for the sample pretrain sources: web lessons, wiki articles, novels, notes.

Each builder takes a `Writer` (and so one seeded rng) and returns plain strings; the caller in
`sources.py` wraps them in each hub dataset's row schema.
"""

from __future__ import annotations

from scripts.sample_data import lexicon as lex
from scripts.sample_data.chat_turns import CODE_TASKS, FUNC_NAMES
from scripts.sample_data.sentences import LEXICON, Writer, cap, plural, roman, title_case, wikify

# ---------------------------------------------------------------- fineweb-edu style web pages


def web_document(w: Writer, n_paragraphs: int) -> str:
    """An educational web page: optional title, paragraphs, sometimes lists, glossaries, code."""
    topic = w.topic()
    parts = [w.title(topic)] if w.rng.random() < 0.55 else []
    for i in range(n_paragraphs):
        parts.append(w.paragraph(topic))
        r = w.rng.random()
        if r < 0.10:
            lead = w.pick(
                [
                    "Here are a few key points:",
                    "Key points to remember:",
                    "In summary:",
                    "The main steps are:",
                    "Things to look for:",
                ]
            )
            bullet = w.pick(["- ", "* ", "• ", None])
            items = [w.sentence(topic) for _ in range(w.rng.randint(3, 6))]
            lines = [f"{bullet}{s}" if bullet else f"{k}. {s}" for k, s in enumerate(items, 1)]
            parts.append(lead + "\n" + "\n".join(lines))
        elif r < 0.15:
            terms = w.rng.sample(LEXICON[topic]["nouns"], 4)
            gloss = [w.fill(f"{cap(t)} – a {{ga}} {{gn}} that {{vs}} {{ns}}.", topic) for t in terms]
            parts.append("Key vocabulary\n" + "\n".join(gloss))
        elif r < 0.19:
            qs = [
                w.fill(
                    w.pick(["Why do {ns} {v}?", "What is a {n}?", "How does a {n} {v}?", "Name {small} kinds of {n}."]),
                    topic,
                )
                for _ in range(3)
            ]
            parts.append("Review questions\n" + "\n".join(f"{k}. {q}" for k, q in enumerate(qs, 1)))
        elif r < 0.22 or (topic == "programming" and r < 0.45):
            task, body = w.pick(CODE_TASKS)
            src = body.format(f=w.pick(FUNC_NAMES), x=w.pick(["items", "values", "text"]))
            code = "\n".join("    " + ln for ln in src.split("\n"))
            parts.append(f"For example, this Python function {task}:\n\n{code}")
        elif r < 0.24:
            rows = [f"{w.year()} | {w.number()} | {w.quantity()}" for _ in range(w.rng.randint(3, 6))]
            parts.append("Year | Count | Measurement\n" + "\n".join(rows))
        if i == 0 and w.rng.random() < 0.1:
            parts.append(f"Grade level: {w.rng.randint(3, 12)}. Reading time: {w.rng.randint(3, 25)} minutes.")
    if w.rng.random() < 0.12:
        parts.append(f"Source: {w.names.person()} ({w.year()}). {w.title(topic)}. {w.names.org(topic)}.")
    return "\n\n".join(parts) if w.rng.random() < 0.8 else "\n".join(parts)


# ---------------------------------------------------------------- wikitext-103 style articles

WIKI_KINDS = {
    "place": (["History", "Geography", "Economy", "Culture", "Transport"], "{T} is a {a} town in {country} ."),
    "person": (["Early life", "Career", "Later years", "Legacy"], "{T} was a {role} from {country} ."),
    "species": (
        ["Taxonomy", "Description", "Distribution and habitat", "Behaviour"],
        "{T} is a species of {n} found in {country} .",
    ),
    "structure": (["History", "Design", "Construction", "Reception"], "{T} is a {a} {n} in {place} ."),
    "event": (["Background", "Course of events", "Aftermath", "Legacy"], "The {T} took place in {year} ."),
}
SUBSECTIONS = ["Early period", "Modern period", "Recognition", "Notes", "Records", "Ecology", "Restoration"]


def wiki_title(w: Writer, kind: str) -> str:
    if kind == "place":
        return w.pick(w.names.places)
    if kind == "person":
        return w.names.person()
    if kind == "species":
        return f"{w.pick(w.names.places)[:6]}ia {w.pick(w.names.last).lower()}i"
    if kind == "structure":
        return f"{w.pick(w.names.places)} {w.pick(['Bridge', 'Tower', 'Hall', 'Lighthouse', 'Station', 'Abbey'])}"
    return f"{w.pick(['Battle', 'Siege', 'Treaty', 'Flood', 'Fair'])} of {w.pick(w.names.places)}"


def wiki_paragraph(w: Writer, topic: str, past_frac: float) -> str:
    return " " + wikify(w.paragraph(topic, w.rng.randint(3, 9), past_frac=past_frac)) + " \n"


def wiki_article(w: Writer) -> list[str]:
    """Rows of one article exactly as wikitext-103-raw stores them (empty rows between blocks)."""
    kind = w.pick(list(WIKI_KINDS))
    sections, lead = WIKI_KINDS[kind]
    topic = {"person": w.topic(), "species": "biology", "event": "history"}.get(
        kind, w.pick(["geography", "architecture", "history"])
    )
    title = wiki_title(w, kind)
    lead_text = lead.replace("{T}", title)
    first = w.fill(lead_text.replace(" .", "."), topic)
    rows = ["", f" = {title} = \n", "", " " + wikify(first + " " + w.paragraph(topic, 4, 0.5)) + " \n"]
    for sec in w.rng.sample(sections, w.rng.randint(2, len(sections))):
        rows += ["", f" = = {sec} = = \n", ""]
        rows += [wiki_paragraph(w, topic, 0.6) for _ in range(w.rng.randint(1, 4))]
        if w.rng.random() < 0.25:
            rows += ["", f" = = = {w.pick(SUBSECTIONS)} = = = \n", ""]
            rows += [wiki_paragraph(w, topic, 0.5) for _ in range(w.rng.randint(1, 2))]
    return rows


# ---------------------------------------------------------------- gutenberg style books

NARRATIVE = [
    "{C} crossed the {room} and set the {object} on the table.",
    "Outside, the rain had not stopped since {weekday}.",
    "{C} had lived in {place} for {small} years and had never seen a {object} like it.",
    "The {colour} light of the {tod} fell across the {room}.",
    "For a long while nobody spoke; {c} turned the {object} over in {poss} hands.",
    "{C} thought of {c2}, and of the {ga} {gn} they had shared in {place}.",
    "At the end of the lane stood a {ga} house with a {colour} door.",
    "{C} laughed, though {pron} did not feel like laughing.",
    "By the time the {animal} called again, {c} had made up {poss} mind.",
    "The road to {place} ran {adv} between fields of barley and low stone walls.",
    "{C} wrote a short letter to {c2} and sealed it with {colour} wax.",
    "Somewhere below, a door closed, and the whole house seemed to listen.",
    "{C} remembered the {object} {poss} mother had kept on the shelf above the stove.",
    "It was nearly {hour} o'clock when {c2} finally came back from {place}.",
    "The {animal} watched them from the hedge, perfectly still.",
    "{C} had always been {adj_c}, even as a child in {place}.",
    "Nobody in {place} trusted the {role} who had arrived that {tod}.",
    "{C2} folded the map twice and put it in {poss2} coat.",
    "The {object} was older than anyone in {place} could remember.",
    "{C} counted the coins twice: {num}, not a penny more.",
    "In the {room} the clock ticked on, {adv} and without mercy.",
    "A cart loaded with {ns} rattled past the window.",
    "{C2} had once been a {role} in {place}, or so the neighbours said.",
    "{C} found the letter in the {room}, folded inside a book about {field}.",
    "The {animal} had left tracks all along the frozen ditch.",
    "{C} poured the tea and waited for {c2} to speak first.",
    "They walked as far as the {colour} gate and then turned back.",
    "The whole village had heard about the {a} {n} by supper.",
    "{C} slept badly and dreamed of {ns} and of the sea at {place}.",
    "The {tod} was cold, and the fire in the {room} had gone out.",
    "{C2} kept a small notebook in which {pron2} recorded every {n} {pron2} saw.",
    "Three days later a stranger arrived from {place}, asking for {c}.",
    "Even the {animal} seemed to know that something had changed.",
    "{C} had never learned to {gv} a {n}, and was too proud to ask.",
]
UTTERANCES = [
    "I never thought the {object} would be so {ga}.",
    "Where did you put the {object}?",
    "We should leave before the weather turns.",
    "Tell me again about {place}.",
    "It was {ga}, and that is all I will say about it.",
    "Do you remember the winter we spent in {place}?",
    "Perhaps, but perhaps not.",
    "If the {animal} comes back, wake me.",
    "There are {small} of them and only one of us.",
    "You worry too much, {c2}.",
    "I have read every letter twice.",
    "What would your father have said?",
    "Nothing is ever as {ga} as it looks from the road.",
    "Then we go at first light.",
]
DIALOGUE = [
    '"{u}" said {c}.',
    '"{u}" {c} asked quietly.',
    '{C} shook {poss} head. "{u}"',
    '"{u}"',
    '"{u}" {c} replied.',
]
ROOMS = "kitchen hall attic parlour study workshop stable garden corridor library".split()
TIMES = "morning afternoon evening dusk dawn".split()
CHAR_ADJS = "stubborn patient restless cheerful watchful careful quick-tempered gentle".split()


def _character(w: Writer) -> dict:
    return {"name": w.pick(w.names.first), **w.pick([{"pron": "he", "poss": "his"}, {"pron": "she", "poss": "her"}])}


def fiction_paragraph(w: Writer, cast: list[dict], topic: str) -> str:
    a, b = w.rng.sample(cast, 2)
    extra = {
        "c": a["name"],
        "c2": b["name"],
        "pron": a["pron"],
        "poss": a["poss"],
        "poss2": b["poss"],
        "pron2": b["pron"],
        "room": w.pick(ROOMS),
        "tod": w.pick(TIMES),
        "weekday": w.pick(lex.WEEKDAYS),
        "colour": w.pick(lex.COLOURS),
        "animal": w.pick(lex.ANIMALS),
        "hour": w.pick(["nine", "ten", "eleven", "two"]),
        "adj_c": w.pick(CHAR_ADJS),
    }
    if w.rng.random() < 0.4:
        u, tmpl = w.pick(UTTERANCES), w.pick(DIALOGUE)
        if u.endswith(".") and tmpl.startswith('"{u}" '):  # "Then we go," said Ana.
            u = u[:-1] + ","
        tmpl = tmpl.replace("{u}", u)
    else:
        tmpl = " ".join(w.rng.sample(NARRATIVE, w.rng.randint(2, 6)))
    for k, v in extra.items():
        tmpl = tmpl.replace("{" + k + "}", v).replace("{" + cap(k) + "}", cap(v))
    return w.fill(tmpl, topic)


def book(w: Writer, target_chars: int) -> tuple[str, str]:
    """(title, text) of a novel or an essay collection with roman-numbered chapters."""
    topic = w.topic()
    essays = w.rng.random() < 0.3
    if essays:
        title = f"Essays on {title_case(w.pick(LEXICON[topic]['fields']))}"
    else:
        title = title_case(
            w.fill(w.pick(["the {ga} {object}", "a summer in {place}", "the {animal} of {place}"]), topic)
        )
    author = w.names.person()
    cast = [_character(w) for _ in range(w.rng.randint(3, 6))]
    out = [title.upper(), f"By {author}"]
    chapter, size = 1, 0
    while size < target_chars:
        head = title_case(w.fill("the {n} and the {object}" if essays else "the {object} at {place}", topic))
        out.append(f"CHAPTER {roman(chapter)}.\n{head.upper()}")
        for _ in range(w.rng.randint(12, 30)):
            p = w.paragraph(topic, w.rng.randint(3, 7)) if essays else fiction_paragraph(w, cast, topic)
            out.append(p)
            size += len(p)
        chapter += 1
    return title, "\n\n".join(out)


# ---------------------------------------------------------------- roam research notes


def roam_note(w: Writer, title: str, others: list[str]) -> str:
    """Nested bullets with [[links]], #tags, TODOs, attributes, a code block now and then."""
    topic = w.topic()
    step = w.pick(["  ", "    ", "    ", "\t"])
    lines = []
    if w.rng.random() < 0.5:
        lines.append(f"tags:: #{topic} #[[{w.pick(others)}]]")
    for _ in range(w.rng.randint(8, 22)):
        head = w.pick(
            [
                f"[[{w.pick(others)}]]",
                w.title(topic),
                f"{{{{[[TODO]]}}}} {w.sentence(topic)}",
                f"**{cap(w.pick(LEXICON[topic]['nouns']))}**",
                f"Notes on [[{w.pick(others)}]]",
            ]
        )
        lines.append(f"- {head}")
        depth = 0
        for _ in range(w.rng.randint(1, 6)):
            depth = w.rng.randint(1, depth + 1) if depth < 3 else w.rng.randint(1, 3)
            body = w.sentence(topic)
            r = w.rng.random()
            if r < 0.2:
                body += f" see [[{w.pick(others)}]]"
            elif r < 0.3:
                body += f" #{w.pick(LEXICON[topic]['nouns']).replace(' ', '-')}"
            elif r < 0.35:
                body = f"DONE {body}"
            elif r < 0.4:
                key = w.pick(["source", "status", "author", "date"])
                body = f"{key}:: {w.pick([w.names.person(), 'draft', w.date()])}"
            lines.append(f"{step * depth}- {body}")
        if w.rng.random() < 0.1:
            task, src = w.pick(CODE_TASKS)
            pad = step + "  "
            code = src.format(f=w.pick(FUNC_NAMES), x="xs").replace("\n", "\n" + pad)
            lines.append(f"{step}- {task}:\n{pad}```python\n{pad}{code}\n{pad}```")
        if w.rng.random() < 0.3:
            lines.append("")
    return "\n".join(lines) + "\n"


def roam_titles(w: Writer, n: int) -> list[str]:
    seen: dict[str, None] = {}
    while len(seen) < n:
        t = w.topic()
        seen[
            w.pick(
                [
                    w.title(t),
                    title_case(plural(w.pick(LEXICON[t]["nouns"]))),
                    f"Project {w.pick(w.names.places)}",
                    f"Reading list {w.pick(LEXICON[t]['fields'])}",
                    f"Meeting with {w.names.person()}",
                ]
            )
        ] = None
    return [t.replace("/", "-").replace(":", " -") for t in seen]


# ---------------------------------------------------------------- fineweb-edu row metadata

CRAWL_START = "2024-02-20"
SITE_SUFFIXES = ["learning", "science", "kids", "notes", "academy", "library", "museum", "studies"]
TLDS = ["com", "org", "edu", "net", "co.uk", "ac.uk", "org.au", "ca"]


def _ascii_slug(s: str) -> str:
    import unicodedata

    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return "-".join("".join(c for c in part if c.isalnum()) for part in s.lower().split()).strip("-")


def fineweb_row(w: Writer, index: int) -> dict:
    """One HuggingFaceFW/fineweb-edu row: a web lesson plus the crawl metadata columns."""
    import datetime as dt
    import uuid

    r = w.rng.random()
    n_par = w.rng.randint(20, 40) if r < 0.02 else w.rng.randint(6, 12) if r < 0.12 else w.rng.randint(1, 4)
    text = web_document(w, n_par)
    when = dt.datetime.fromisoformat(CRAWL_START) + dt.timedelta(seconds=w.rng.randint(0, 14 * 86400))
    stamp = when.strftime("%Y%m%d%H%M%S")
    host = f"www.{_ascii_slug(w.pick(w.names.places))}{w.pick(SITE_SUFFIXES)}.{w.pick(TLDS)}"
    slug = _ascii_slug(text.split("\n", 1)[0][:60]) or f"page-{index}"
    score = w.rng.randint(160, 310) / 64  # fineweb-edu keeps int_score >= 3
    return {
        "text": text,
        "id": f"<urn:uuid:{uuid.UUID(int=w.rng.getrandbits(128), version=4)}>",
        "dump": "CC-MAIN-2024-10",
        "url": f"https://{host}/{w.pick(['articles', 'lessons', 'blog', 'resources', 'topics'])}/{slug}",
        "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "file_path": (
            f"s3://commoncrawl/crawl-data/CC-MAIN-2024-10/segments/1707947{w.rng.randint(470000, 479999)}"
            f".{w.rng.randint(10, 99)}/warc/CC-MAIN-{stamp}-{stamp[:8]}{w.rng.randint(100000, 235959)}"
            f"-{w.rng.randint(0, 899):05d}.warc.gz"
        ),
        "language": "en",
        "language_score": round(w.rng.uniform(0.86, 0.995), 6),
        "token_count": max(1, round(len(text) / 4.6)),
        "score": score,
        "int_score": max(3, round(score)),
    }
