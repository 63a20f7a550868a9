"""Instruction rows (databricks-dolly-15k style) and primer chats for the offline sample.

`dolly_row(w, category)` returns {instruction, context, response, category}; the closed-book
categories (closed_qa, information_extraction, summarization) get a generated context paragraph
and answers derived from the same fact record, so the answer is really in the context.
`primer_messages(w, long)` returns one chat in the voice of niels_gpt: friendly and precise.
"""

from __future__ import annotations

import re

from scripts.sample_data import chat_turns, documents
from scripts.sample_data.sentences import LEXICON, TOPIC_NAMES, Writer, cap, fix_articles, plural

YEAR_RE = re.compile(r"\b(1[5-9]\d\d|20[0-2]\d)\b")


def fact_record(w: Writer) -> dict:
    topic = w.topic()
    lx = LEXICON[topic]
    return {
        "topic": topic,
        "kind": w.pick(["town", "person", "society"]),
        "name": w.pick(w.names.places),
        "person": w.names.person(),
        "country": w.pick(w.names.countries),
        "year": w.rng.randint(1620, 1990),
        "pop": w.rng.randint(800, 400_000),
        "known": plural(w.pick(lx["nouns"])),
        "role": w.pick(lx["roles"]).replace("_", " "),
        "field": w.pick(lx["fields"]),
        "count": w.rng.randint(3, 60),
        "place2": w.pick(w.names.places),
    }


def fact_context(w: Writer, f: dict) -> str:
    if f["kind"] == "town":
        head = (
            f"{f['name']} is a town in {f['country']}. It was founded in {f['year']} by {f['person']}, a {f['role']} "
            f"from {f['place2']}. Today it has about {f['pop']:,} inhabitants and is best known for its {f['known']}."
        )
    elif f["kind"] == "person":
        head = (
            f"{f['person']} (born {f['year']} in {f['name']}) is a {f['role']} who works in {f['field']}. "
            f"Over a long career, {f['person'].split()[-1]} has published {f['count']} studies on {f['known']} "
            f"and has taught in {f['place2']} and {f['country']}."
        )
    else:
        head = (
            f"The {f['name']} Society for {f['field'].title()} was founded in {f['year']} by {f['person']}. "
            f"It has {f['count']} local chapters across {f['country']} and about {f['pop']:,} members, "
            f"most of whom are interested in {f['known']}."
        )
    return fix_articles(head) + " " + w.paragraph(f["topic"], w.rng.randint(2, 5), past_frac=0.4)


def closed_qa(w: Writer, f: dict) -> tuple[str, str]:
    subject = f["person"] if f["kind"] == "person" else f["name"]
    options = {
        "town": [
            (f"When was {f['name']} founded?", f"{f['name']} was founded in {f['year']}."),
            (f"Who founded {f['name']}?", f"It was founded by {f['person']}, a {f['role']} from {f['place2']}."),
            (f"How many people live in {f['name']}?", f"About {f['pop']:,} people."),
        ],
        "person": [
            (f"Where was {f['person']} born?", f"{f['person']} was born in {f['name']}."),
            (f"How many studies has {f['person']} published?", f"{f['count']} studies, mostly on {f['known']}."),
        ],
        "society": [
            (f"Who founded the {f['name']} Society?", f"{f['person']} founded it in {f['year']}."),
            ("How many local chapters does the society have?", f"It has {f['count']} local chapters."),
        ],
    }[f["kind"]]
    q, a = w.pick(options)
    prefix = w.pick([f"Given this paragraph about {subject}, ", "Based on the text, ", ""])
    return (prefix + q[0].lower() + q[1:] if prefix else q), a


def dolly_row(w: Writer, category: str) -> dict:
    context = ""
    topic = w.topic()
    if category in ("closed_qa", "information_extraction", "summarization"):
        f = fact_record(w)
        context = fact_context(w, f)
        if category == "closed_qa":
            instruction, response = closed_qa(w, f)
        elif category == "information_extraction":
            years = sorted(set(YEAR_RE.findall(context)))
            instruction = w.pick(
                [
                    "Extract all the years mentioned in this text, in order, separated by commas.",
                    "List every year that appears in the passage.",
                ]
            )
            response = ", ".join(years) if years else "The passage does not mention any years."
        else:
            instruction = w.pick(
                [
                    "Summarize this paragraph in one or two sentences.",
                    "Give me a short summary of this text.",
                    "What is this passage about? Keep it brief.",
                ]
            )
            response = fix_articles(
                context.split(". ")[0] + ". " + w.fill("It also describes how {ns} {v}.", f["topic"])
            )
    elif category == "open_qa":
        instruction, response = w.pick([chat_turns.definition, chat_turns.compare])(w, topic)
    elif category == "general_qa":
        instruction, response = w.pick([chat_turns.advice, chat_turns.how_to, chat_turns.definition])(w, topic)
    elif category == "classification":
        t1, t2 = w.rng.sample(TOPIC_NAMES, 2)
        items = [(x, t1) for x in w.rng.sample(LEXICON[t1]["nouns"], 3)] + [
            (x, t2) for x in w.rng.sample(LEXICON[t2]["nouns"], 3)
        ]
        w.rng.shuffle(items)
        instruction = f"Classify each of the following as related to {t1} or {t2}: " + ", ".join(x for x, _ in items)
        response = "\n".join(f"{cap(x)}: {t}" for x, t in items)
    elif category == "brainstorming":
        instruction, response = w.pick([chat_turns.examples, chat_turns.advice])(w, topic)
        if w.rng.random() < 0.5:
            instruction = w.fill(
                w.pick(
                    [
                        "Give me some ideas for a weekend project about {ns}.",
                        "What are fun ways to learn about {field} with kids?",
                    ]
                ),
                topic,
            )
            ideas = [
                "{Gv} a {n} and {gv2} the result.",
                "Visit a {a} {n} in {place}.",
                "Keep a diary of {ns} you {gv}.",
                "Ask a {role} to show you how to {v} a {n}.",
            ]
            response = "\n".join(f"- {w.fill(w.pick(ideas), topic)}" for _ in range(w.rng.randint(3, 6)))
    else:  # creative_writing
        if w.rng.random() < 0.5:
            instruction = w.fill("Write a short poem about {ns}.", topic)
            response = chat_turns.poem(w, topic)
        else:
            instruction = f'Write the opening of a story called "{chat_turns.story_title(w, topic)}".'
            cast = [
                {"name": w.pick(w.names.first), "pron": "she", "poss": "her"},
                {"name": w.pick(w.names.first), "pron": "he", "poss": "his"},
            ]
            response = "\n\n".join(documents.fiction_paragraph(w, cast, topic) for _ in range(w.rng.randint(2, 4)))
    return {"instruction": instruction, "context": context, "response": response, "category": category}


SYSTEM_PROMPTS = [
    "You are niels_gpt, a friendly and precise assistant.",
    "You are niels_gpt. Answer clearly, keep it short, and say when you are unsure.",
    "You are a helpful assistant called niels_gpt. Prefer concrete examples.",
]
OPENERS = ["", "", "Sure! ", "Good question. ", "Happy to help. ", "Here's a clear way to think about it. "]
CLOSERS = ["", "", "", "\n\nLet me know if you'd like an example.", "\n\nWant me to go deeper on any part?"]


def _assistant(w: Writer, text: str) -> str:
    return w.pick(OPENERS) + text + w.pick(CLOSERS)


def primer_messages(w: Writer, long: bool) -> list[dict]:
    """One primer chat: optional system message, then user/assistant turns (a long one ~6,000+ chars)."""
    topic = w.topic()
    msgs = [{"role": "system", "content": w.pick(SYSTEM_PROMPTS)}] if w.rng.random() < 0.4 else []
    r = w.rng.random()
    if r < 0.07:
        msgs += [
            {"role": "user", "content": w.pick(["Who are you?", "What are you?", "Tell me about yourself."])},
            {"role": "assistant", "content": w.pick(chat_turns.IDENTITY)},
        ]
    elif r < 0.13:
        who = w.names.person()
        msgs += [
            {"role": "user", "content": f"Who is {who}?"},
            {
                "role": "assistant",
                "content": f"I don't have reliable information about {who}, so I won't guess. "
                "If you tell me where you came across the name, I can help you work out what to look for.",
            },
        ]
    else:
        q, a = chat_turns.qa(w, topic)
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": _assistant(w, a)}]
    turns = w.rng.randint(6, 10) if long else w.pick([0, 0, 1, 1, 2, 3])
    for _ in range(turns):
        if w.rng.random() < 0.15:
            msgs += [
                {"role": "user", "content": w.pick(chat_turns.THANKS_EN)},
                {
                    "role": "assistant",
                    "content": w.pick(["You're welcome!", "Glad it helped.", "Any time. Good luck!"]),
                },
            ]
            continue
        q, a = chat_turns.followup(w, topic) if w.rng.random() < 0.6 else chat_turns.qa(w, topic)
        if long:
            a += "\n\n" + "\n\n".join(w.paragraph(topic, w.rng.randint(5, 9)) for _ in range(2))
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": _assistant(w, a)}]
    return msgs
