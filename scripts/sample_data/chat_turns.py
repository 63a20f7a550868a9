"""Questions, answers and follow-ups for the sample chat sources (dolly15k, oasst1, primer).

Built on `sentences.Writer`; arithmetic and unit conversions are computed, so every
answer the sample data gives about them is right. The code snippets and the German, Spanish and
French phrase banks are the project's own, written for these samples.
"""

from __future__ import annotations

from scripts.sample_data.sentences import LEXICON, Writer, cap, fix_articles, plural, title_case, verb_ing

CODE_TASKS = [  # (what it does, code); {f}/{x} are the function and argument names, {{}} a literal {}
    (
        "returns the sum of the even numbers in a list",
        """\
def {f}({x}):
    total = 0
    for value in {x}:
        if value % 2 == 0:
            total += value
    return total""",
    ),
    (
        "reverses the words in a sentence",
        """\
def {f}({x}):
    return " ".join(reversed({x}.split()))""",
    ),
    (
        "counts how often each word appears in a text",
        """\
def {f}({x}):
    counts = {{}}
    for word in {x}.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts""",
    ),
    (
        "checks whether a number is prime",
        """\
def {f}({x}):
    if {x} < 2:
        return False
    i = 2
    while i * i <= {x}:
        if {x} % i == 0:
            return False
        i += 1
    return True""",
    ),
    (
        "converts a temperature from Celsius to Fahrenheit",
        """\
def {f}({x}):
    return {x} * 9 / 5 + 32""",
    ),
    (
        "returns the moving average of a list with a window of 3",
        """\
def {f}({x}):
    out = []
    for i in range(len({x}) - 2):
        out.append(sum({x}[i:i + 3]) / 3)
    return out""",
    ),
    (
        "finds an item in a sorted list with binary search",
        """\
def {f}({x}, target):
    lo, hi = 0, len({x}) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if {x}[mid] == target:
            return mid
        if {x}[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1""",
    ),
    (
        "reads a text file and returns its non-empty lines",
        """\
def {f}({x}):
    with open({x}, encoding="utf-8") as fh:
        return [line.rstrip("\\n") for line in fh if line.strip()]""",
    ),
    (
        "merges two dictionaries, preferring values from the second",
        """\
def {f}({x}, other):
    merged = dict({x})
    merged.update(other)
    return merged""",
    ),
    (
        "returns the largest value in a list without using max()",
        """\
def {f}({x}):
    best = {x}[0]
    for value in {x}[1:]:
        if value > best:
            best = value
    return best""",
    ),
]
FUNC_NAMES = "solve helper compute process handle run transform check".split()
ARG_NAMES = "items values data numbers xs text path seq".split()

IDENTITY = [
    "I'm niels_gpt, a small language model trained on a modest mix of web pages, encyclopedia "
    "articles, books and notes. I try to be helpful and precise, and I say so when I'm not sure.",
    "I'm niels_gpt. I'm a small GPT-style model, so I work best on short, clear questions. If an "
    "answer depends on facts I can't check, I'll tell you rather than guess.",
]
FOLLOWUPS_EN = [
    "Can you give me a concrete example?",
    "Thanks! Can you make that shorter?",
    "Why does that happen?",
    "How would I explain this to a ten-year-old?",
    "Is there a common mistake people make here?",
    "What should I read next?",
    "Could you put that in a list?",
    "Okay, and how is that different from {ns}?",
]
THANKS_EN = ["Thanks, that helps.", "Great, thank you!", "Perfect, that's what I needed.", "Got it, thanks."]

FOREIGN = {  # lang: (nouns, prompts, answer sentences, follow-ups); {n}/{n2} are nouns of that language
    "de": (
        "Garten Brot Zug Fluss Katze Fahrrad Buch Küche Wetter Computer Berg Schule Lampe Apfel".split(),
        [
            "Wie pflege ich am besten meinen {n}?",
            "Kannst du mir erklären, was ein {n} ist?",
            "Was ist der Unterschied zwischen {n} und {n2}?",
            "Hast du Tipps für einen Anfänger beim Thema {n}?",
        ],
        [
            "Das ist eine gute Frage.",
            "Zuerst solltest du dir überlegen, wofür du den {n} brauchst.",
            "Viele Leute vergessen, dass ein {n} regelmäßig Aufmerksamkeit braucht.",
            "Ein {n} und ein {n2} haben mehr gemeinsam, als man denkt.",
            "Am wichtigsten ist Geduld: kleine Schritte führen oft zum Ziel.",
            "Wenn du unsicher bist, frag jemanden, der sich mit {n} gut auskennt.",
        ],
        ["Danke! Und was mache ich, wenn das nicht klappt?", "Kannst du das kürzer sagen?"],
    ),
    "es": (
        "jardín pan tren río gato bicicleta libro cocina tiempo ordenador montaña escuela lámpara manzana".split(),
        [
            "¿Cómo cuido mejor mi {n}?",
            "¿Puedes explicarme qué es un {n}?",
            "¿Cuál es la diferencia entre {n} y {n2}?",
            "¿Tienes consejos para un principiante con el {n}?",
        ],
        [
            "Buena pregunta.",
            "Primero piensa para qué necesitas el {n}.",
            "Mucha gente olvida que un {n} necesita atención con regularidad.",
            "Un {n} y un {n2} se parecen más de lo que parece.",
            "Lo más importante es la paciencia: los pasos pequeños también cuentan.",
            "Si tienes dudas, pregunta a alguien que sepa mucho de {n}.",
        ],
        ["¡Gracias! ¿Y si no funciona?", "¿Puedes decirlo más corto?"],
    ),
    "fr": (
        "jardin pain train fleuve chat vélo livre cuisine temps ordinateur montagne école lampe pomme".split(),
        [
            "Comment entretenir au mieux mon {n} ?",
            "Peux-tu m'expliquer ce qu'est un {n} ?",
            "Quelle est la différence entre {n} et {n2} ?",
            "As-tu des conseils pour un débutant avec le {n} ?",
        ],
        [
            "C'est une bonne question.",
            "D'abord, demande-toi à quoi te sert le {n}.",
            "Beaucoup de gens oublient qu'un {n} demande de l'attention régulièrement.",
            "Un {n} et un {n2} ont plus en commun qu'on ne le croit.",
            "Le plus important, c'est la patience : les petits pas comptent aussi.",
            "Si tu hésites, demande à quelqu'un qui connaît bien le {n}.",
        ],
        ["Merci ! Et si ça ne marche pas ?", "Tu peux le dire plus brièvement ?"],
    ),
}


ADVICE_TIPS = [
    "Start with the {n}: it explains a lot about how {ns} {v}.",
    "Keep a notebook and record every {n} you {gv}.",
    "Find a {role} who is willing to answer questions.",
    "Practise a little every day rather than all at once.",
    "Read one short text about {ns} each week.",
    "Don't worry about being {a} at first; being {ga} matters more.",
    "Try to {gv} a real {n} instead of only reading about it.",
]
POEM_LINES = [
    "The {a} {n} {vs} at dawn,",
    "and every {n} is {a} again;",
    "I {gvd} the {ns} beneath the sky",
    "while {ns} {v} along the {object},",
    "{adv} the {n} remembers",
    "what the {a2} {n2} forgot.",
]


def fill_sample(w: Writer, templates: list[str], k: int, topic: str) -> list[str]:
    """k of the templates, drawn without replacement, each filled for the topic."""
    return [w.fill(t, topic) for t in w.rng.sample(templates, k)]


def definition(w: Writer, topic: str) -> tuple[str, str]:
    n = w.pick(LEXICON[topic]["nouns"])
    q = w.pick(
        [
            "What is a {n}?",
            "Can you explain what a {n} is?",
            'What does the term "{n}" mean in {field}?',
            "I keep hearing about the {n}. What is it?",
        ]
    ).format(n=n, field=w.pick(LEXICON[topic]["fields"]))
    first = w.fill(f"A {n} is a {{ga}} {{gn}} in {{field}} that {{vs}} {{ns}}.", topic)
    return w.fill(q, topic), first + " " + w.paragraph(topic, w.rng.randint(2, 5))


def how_to(w: Writer, topic: str) -> tuple[str, str]:
    v, n = w.pick(LEXICON[topic]["verbs"]), w.pick(LEXICON[topic]["nouns"])
    q = w.pick([f"How do I {v} a {n}?", f"What are the steps to {v} a {n}?", f"Any tips for {verb_ing(v)} a {n}?"])
    steps = [
        w.fill(
            w.pick(
                [
                    "{Gv} the {n} and check that it is {a}.",
                    "{V} the {ns} {adv}.",
                    "Wait about {dur}, then {gv} the result.",
                    "Make sure the {n} is not too {a}.",
                    "Write down what you {gvd} so you can {gv} it later.",
                ]
            ),
            topic,
        )
        for _ in range(w.rng.randint(3, 6))
    ]
    body = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return w.fill(q, topic), f"Here is a simple way to do it:\n\n{body}\n\n" + w.sentence(topic)


def compare(w: Writer, topic: str) -> tuple[str, str]:
    a, b = w.rng.sample(LEXICON[topic]["nouns"], 2)
    q = fix_articles(f"What is the difference between a {a} and a {b}?")
    ans = (
        w.fill(f"A {a} {{vs}} {{ns}}, while a {b} usually {{vs}} {{ns2}}.", topic)
        + " "
        + w.fill(f"In practice, a {a} is {{a}} and a {b} is {{a2}}.", topic)
        + " "
        + w.sentence(topic)
    )
    return cap(q), ans


def examples(w: Writer, topic: str) -> tuple[str, str]:
    k = w.rng.randint(3, 6)
    items = w.rng.sample(LEXICON[topic]["nouns"], k)
    q = w.pick(
        [
            f"Give me {k} examples of things studied in {topic}.",
            f"List {k} words related to {topic}.",
            f"Name {k} things a {w.pick(LEXICON[topic]['roles']).replace('_', ' ')} works with.",
        ]
    )
    return q, "\n".join(f"- {cap(plural(x))}" for x in items)


def advice(w: Writer, topic: str) -> tuple[str, str]:
    field = w.pick(LEXICON[topic]["fields"])
    q = w.pick(
        [
            f"How can I get better at {field}?",
            f"I'm new to {field}. Where should I start?",
            f"What's a good way to learn {field} on my own?",
        ]
    )
    tips = fill_sample(w, ADVICE_TIPS, 4, topic)
    return q, "A few things that help:\n" + "\n".join(f"- {t}" for t in tips)


def arithmetic(w: Writer) -> tuple[str, str]:
    a, b = w.rng.randint(12, 999), w.rng.randint(3, 99)
    op = w.pick(["+", "-", "*"])
    val = {"+": a + b, "-": a - b, "*": a * b}[op]
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    q = w.pick([f"What is {a} {op} {b}?", f"What's {a} {word} {b}?", f"Can you compute {a} {op} {b} for me?"])
    hi, lo = divmod(b, 10)
    if op == "*" and hi and lo:
        work = f"{a} × {hi * 10} = {a * hi * 10:,} and {a} × {lo} = {a * lo:,}; together that is {val:,}."
        return q, f"{a} × {b} = {val:,}.\n\nWorking: {work}"
    return q, f"{a} {'×' if op == '*' else op} {b} = {val:,}."


def conversion(w: Writer) -> tuple[str, str]:
    kind = w.pick(["h", "km", "kg", "c"])
    x = round(w.rng.uniform(1, 90), 1)
    if kind == "h":
        return f"How many minutes are in {x} hours?", f"{x} hours × 60 = {x * 60:,.0f} minutes."
    if kind == "km":
        return f"How many metres is {x} km?", f"{x} km × 1,000 = {x * 1000:,.0f} metres."
    if kind == "kg":
        return f"Convert {x} kg to grams.", f"{x} kg is {x * 1000:,.0f} g (1 kg = 1,000 g)."
    return (f"What is {x} °C in Fahrenheit?", f"{x} °C is {x * 9 / 5 + 32:.1f} °F. The formula is °F = °C × 9/5 + 32.")


def code(w: Writer) -> tuple[str, str]:
    task, body = w.pick(CODE_TASKS)
    f, x = w.pick(FUNC_NAMES) + "_" + w.pick(["values", "text", "list", "input", "data"]), w.pick(ARG_NAMES)
    q = w.pick(
        [
            f"Write a Python function that {task}.",
            f"Can you show me Python code that {task}?",
            f"I need a small function that {task}. Python please.",
        ]
    )
    src = body.format(f=f, x=x)
    return q, (
        f"Here is one way to write it:\n\n```python\n{src}\n```\n\n"
        f"`{f}` takes `{x}` and {task.replace('returns', 'gives back')}. "
        "It uses only plain Python, so it runs anywhere."
    )


ASKERS = [definition, how_to, compare, examples, advice]


def qa(w: Writer, topic: str | None = None) -> tuple[str, str]:
    """One question and its answer: mostly topical, sometimes maths, units or code."""
    r = w.rng.random()
    if r < 0.08:
        return arithmetic(w)
    if r < 0.13:
        return conversion(w)
    if r < 0.22:
        return code(w)
    return w.pick(ASKERS)(w, topic or w.topic())


def followup(w: Writer, topic: str) -> tuple[str, str]:
    q = w.fill(w.pick(FOLLOWUPS_EN), topic)
    if "shorter" in q:
        return q, w.sentence(topic)
    if "list" in q:
        return q, "\n".join(f"- {w.sentence(topic)}" for _ in range(w.rng.randint(2, 4)))
    return q, "\n\n".join(w.paragraph(topic, w.rng.randint(2, 5)) for _ in range(w.rng.randint(1, 2)))


def foreign_turn(w: Writer, lang: str, prompter: bool, first: bool) -> str:
    nouns, prompts, answers, follow = FOREIGN[lang]
    n, n2 = w.rng.sample(nouns, 2)
    if prompter:
        return (w.pick(prompts) if first else w.pick(follow)).format(n=n, n2=n2)
    return " ".join(s.format(n=n, n2=n2) for s in w.rng.sample(answers, w.rng.randint(2, 4)))


def poem(w: Writer, topic: str) -> str:
    lines = []
    for _ in range(w.rng.randint(2, 4)):
        lines += fill_sample(w, POEM_LINES, 4, topic)
        lines.append("")
    return "\n".join(lines).strip()


def story_title(w: Writer, topic: str) -> str:
    return title_case(w.fill("the {a} {n} of {place}", topic))
