"""Reading and writing release folders (DESIGN 2.11).

- :mod:`.schema`: what a release holds, table by table (columns, types, keys, references), with
  :mod:`.shapes` (the arrow types of structured JSON columns in Parquet) and :mod:`.splits` (the
  split each row belongs to);
- :mod:`.tables`: which records of the database belong to a release of some splits
  (:class:`.tables.ReleaseScope`) and their values;
- :mod:`.export`: the streaming writer of a release folder (JSON Lines, Parquet, MOT, the record
  index, statistics, dataset card, Croissant metadata, SHA-256 manifest) with bounded memory; it
  reads tables a chunk at a time as arrow arrays (:mod:`.reading`: ``COPY`` on PostgreSQL) and
  encodes them column by column (:mod:`.encode`), byte for byte as the row-at-a-time writer
  :mod:`.reference` does;
- :mod:`.check`: checksum verification and reference resolution of a folder, and the record-level
  diff of two folders;
- :mod:`.importer`: loading a verified folder into a fresh instance;
- :mod:`.metadata`, :mod:`.hub`, :mod:`.datasheet`, :mod:`.plots`: the dataset card (a Hugging
  Face card with a config per table, and a datasheet with its plots) and the Croissant file.

Folder layout (every path relative to the release folder)::

    release.json          format, name, version, splits, parent, tables (rows, key, columns), changes
    README.md             the dataset card: Hugging Face front matter (a config per table) and datasheet
    croissant.json        Croissant 1.0 metadata (JSON-LD) of the Parquet tables
    construction.json     prompts, checkpoints, budgets, review policy, software versions
    statistics.json       audits, pre-adjudication agreement, vote distributions, corrections,
                          rejection reasons, reviewer time per accepted item, relation counts
    data/<table>.jsonl    one JSON object per line, keys sorted
    data/<table>/<split>.parquet  the same records, typed, one file per split where the table has rows
                          (``shared.parquet`` for a table whose rows serve every split, :mod:`.splits`;
                          formats 1 and 2 held one ``data/<table>.parquet``, format 1 with JSON columns
                          and times as text)
    plots/<name>.png      the datasheet's plots
    index/records.tsv     table, key and SHA-256 prefix of every record (diffs between releases)
    mot/<split>/<video>/  MOTChallenge ground truth of the video's frozen pool (gt/gt.txt, seqinfo.ini)
    media/<path>          the video files, when the release includes them
    SHA256SUMS            the SHA-256 of every other file (``sha256sum -c`` reads it)
"""
