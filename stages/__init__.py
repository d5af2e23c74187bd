"""Thin entry points, one per DVC stage: parse params, call `bert`, write outputs. Each ends with
`run_main(main)` (bert/errors.py), which turns a user's mistake into one line on stderr."""
