"""Downloads: fetch a file from an https://, http://, file:// URL or a local path, resumably and
verified, into a staging folder that is published whole.

- `transport`: bytes from a source to a `.part` file (HTTP with retries, resume and a minimum
  rate; local copies), and what a source and its file name are;
- `checksums`: the sum a file must have (given, or published beside a Wikimedia dump);
- `fetch`: `download(source, dest, checksum)`, one verified file;
- `manifest`: the manifest of a download's local sources (each file's size and SHA-256, cached
  by file identity), which DVC hashes in their place, and the check of what a download reads;
- `staging`: the staging folder of a download stage (`staged`), reused across failed runs, and
  publishing it as one folder.

Nothing here is imported by this package itself, so a module that needs one file (the vocabulary)
imports `bert.download.fetch` alone.
"""
