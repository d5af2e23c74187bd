"""The bundled sample world: a small fictional encyclopaedia, books, SQuAD, SWAG and GLUE, from one seed.

`python -m sample_world --out data/sample --seed 0` invents people, places, organisations,
universities and events with consistent facts (a person is born in a town in a year, studies at a
university, marries, founds a company; an event happens in a town ...) and writes them in the
formats the real sources have, so the demo pipeline runs exactly the code a real run does:

  wikipedia/samplewiki-20260101-pages-articles-multistream.xml.bz2
  wikipedia/samplewiki-20260101-pages-articles-multistream-index.txt.bz2
                                                         MediaWiki XML export 0.11 as Wikimedia's
                                                         multistream dump and its index (like enwiki)
  books/txt/<slug>.txt                                   narrative books, one paragraph a line
  books/parquet/train-00000-of-00001.parquet             the same lines, one `text` row each
  squad/v1.1/{train,dev}-v1.1.json                       SQuAD v1.1 (dev: three gold answers)
  squad/v2.0/{train,dev}-v2.0.json                       SQuAD v2.0 (a third unanswerable)
  swag/{train,val}.csv                                   SWAG as rowanz/swagaf's files
  glue/<Task>/{train,dev}.tsv                            GLUE as download_glue_data.py writes it:
                                                         CoLA, SST-2, MRPC, STS-B, QQP, QNLI, RTE,
                                                         MNLI (train, dev_matched, dev_mismatched)

Every fact asked about in SQuAD is stated in the wiki prose and restated in the books, so a model
pretrained on them starts fine-tuning knowing the answers. Dev questions are about entities that
train questions never ask about. SQuAD contexts are the articles' prose paragraphs rendered as
wikiextractor renders them (links become their labels, ''italic'' becomes "italic", refs vanish).
The SWAG and GLUE sets are small (600 train, 200 dev rows; MNLI 900 and 2 x 200) and made of
the same facts in the same words: a true SWAG ending or an entailed hypothesis is what the article
or a book says, a false one the same words with another entity's value. Output is byte-identical
for the same seed.

  names.py       the word lists everything is named from
  world.py       the entities and their facts (build_world)
  markup.py      Piece and Paragraph: wikitext and its plain rendering, with exact fact spans
  prose.py       what an article says about each kind of entity, in paragraphs
  articles.py    an article's wikitext: infobox, prose sections, tables, references, categories
  wiki_xml.py    the MediaWiki XML export around the articles
  books.py       the books: narrative chapters restating the facts
  squad.py       SQuAD v1.1 and v2.0 questions about the articles' prose
  statements.py  facts as sentences with exact value spans: the article's and the books' phrasing
  swag.py        SWAG: a sentence, the next one's first words, its true and three false endings
  glue.py        the eight GLUE tasks, built from statements, SQuAD questions and phrase lists
  generate.py    all of it as {path: bytes}, and writing that into a folder
"""
