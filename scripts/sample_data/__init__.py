"""The seeded generator of the offline sample data: data/sample/ and data/primer.{jsonl,txt}.

    python -m scripts.sample_data [--out-root .] [--seed 0] [--only wikitext dolly15k]

Every word is the project's own: `lexicon` (word lists) -> `sentences` (the `Writer` grammar) ->
`documents` (web pages, wiki articles, books, notes), `chat_turns` (questions and answers),
`instructions` (dolly rows, primer chats), `message_trees` (oasst1 trees), `exports` (raw
Gutenberg books, Roam exports) -> `sources` (each source's files in its hub schema).
"""
