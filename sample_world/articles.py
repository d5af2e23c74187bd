"""An article's wikitext: infobox + prose sections + lists/tables + references + categories."""

import random
from dataclasses import dataclass

from sample_world.names import WORK_ADJ, WORK_NOUN, ascii_fold
from sample_world.prose import PARAGRAPHS, WIKI_CONTEXT_HEADING, context_paragraph
from sample_world.world import Entity, World


def birth_date_template(p: Entity) -> str:
    m, d = p.attrs["birth_md"]
    return f"{{{{birth date|{p.attrs['birth']}|{m}|{d}}}}}"


def infobox(e: Entity) -> str:
    a, f = e.attrs, e.facts
    if e.kind == "person":
        rows = [
            ("name", e.title),
            ("image", f"{ascii_fold(e.title).replace(' ', '_')}.jpg"),
            ("birth_date", birth_date_template(e)),
            ("birth_place", f"[[{f['birthplace']}]], [[{a['birthplace'].attrs['country'].title}]]"),
        ]
        if "death_year" in f:
            dm, dd = a["death_md"]
            bm, bd = a["birth_md"]
            rows += [
                ("death_date", f"{{{{death date and age|{a['death']}|{dm}|{dd}|{a['birth']}|{bm}|{bd}}}}}"),
                ("death_place", f"[[{f['death_place']}]]"),
            ]
        if "university" in f:
            rows.append(("alma_mater", f"[[{f['university']}]]"))
        rows.append(("occupation", f["occupation"].capitalize()))
        if "spouse" in f:
            rows.append(("spouse", f"{{{{marriage|[[{f['spouse']}]]|{f['marriage_year']}}}}}"))
        if "founded" in f:
            rows.append(("known_for", f"Founding the [[{f['founded']}]]"))
        name = "Infobox person"
    elif e.kind == "town":
        rows = [
            ("name", e.title),
            ("settlement_type", "Town"),
            ("subdivision_type", "Country"),
            ("subdivision_name", f"{{{{flag|{f['country']}}}}}"),
            ("established_date", f["founded_year"]),
            ("population_total", f"{{{{formatnum:{f['population'].replace(',', '')}}}}}"),
            ("population_as_of", "2020"),
        ]
        name = "Infobox settlement"
    elif e.kind == "organisation":
        rows = [
            ("name", e.title),
            ("type", a["kind"].capitalize()),
            ("founded", f"{{{{start date and age|{f['founded_year']}}}}}"),
            ("founder", f"[[{f['founder']}]]"),
            ("hq_location_city", f"[[{f['headquarters']}]]"),
            ("num_employees", f"{f['employees']} ({f['employees_year']})"),
        ]
        name = "Infobox organization"
    elif e.kind == "university":
        rows = [
            ("name", e.title),
            ("motto", f"''{f['motto']}''"),
            ("established", f["founded_year"]),
            ("founder", f"[[{f['founder']}]]"),
            ("city", f"[[{f['town']}]]"),
            ("students", f["students"]),
        ]
        name = "Infobox university"
    elif e.kind == "event":
        rows = [
            ("title", e.title),
            ("date", f["year"]),
            ("location", f"[[{f['place']}]]"),
            ("participants", f["count"]),
        ]
        name = "Infobox event"
    else:
        rows = [
            ("conventional_long_name", e.title),
            ("capital", f"[[{f['capital']}]]"),
            ("official_languages", f["language"]),
            ("currency", f["currency"]),
            ("established_date1", f["independence_year"]),
        ]
        name = "Infobox country"
    width = max(len(k) for k, _ in rows)
    return "{{" + name + "\n" + "".join(f"| {k.ljust(width)} = {v}\n" for k, v in rows) + "}}"


def categories(e: Entity) -> list[str]:
    f, a = e.facts, e.attrs
    if e.kind == "person":
        country = a["birthplace"].attrs["country"]
        cats = [f"{f['birth_year']} births"] + (
            [f"{f['death_year']} deaths"] if "death_year" in f else ["Living people"]
        )
        return cats + [f"{country.attrs['demonym']} {f['occupation']}s", f"People from {f['birthplace']}"]
    if e.kind == "town":
        return [f"Towns in {f['country']}", f"Populated places established in {f['founded_year']}"]
    if e.kind == "organisation":
        return [
            f"Companies based in {f['headquarters']}",
            f"Organizations established in {f['founded_year']}",
        ]
    if e.kind == "university":
        return [
            f"Universities in {a['town'].attrs['country'].title}",
            f"Educational institutions established in {f['founded_year']}",
        ]
    if e.kind == "event":
        return [f"{f['year']} in {a['town'].attrs['country'].title}", f"Events in {f['place']}"]
    return ["Fictional countries"]


def extra_blocks(w: World, e: Entity, rng: random.Random) -> list[str]:
    """Lists and tables: markup extraction drops, so they never hold the only copy of a fact."""
    blocks = []
    if e.kind == "town":
        natives = [p for p in w.people if p.attrs["birthplace"] is e][:6]
        if natives:
            blocks.append(
                "== Notable people ==\n"
                + "".join(
                    f"* [[{p.title}]] ({p.facts['birth_year']}&ndash;{p.facts.get('death_year', '')}), {p.facts['occupation']}\n"
                    for p in natives
                ).rstrip()
            )
    if e.kind == "person" and "work" in e.facts and rng.random() < 0.5:
        rows = [(int(e.facts["work_year"]), e.facts["work"])] + [
            (
                int(e.facts["work_year"]) + k * rng.randint(2, 6),
                f"{rng.choice(WORK_ADJ)} {rng.choice(WORK_NOUN)}",
            )
            for k in (1, 2)
        ]
        table = (
            '{| class="wikitable sortable"\n|+ Selected works\n! Year !! Title !! Notes\n'
            + "".join(
                f"|-\n| {y} || ''{t}'' || {'{{n/a}}' if i else 'Best known'}\n"
                for i, (y, t) in enumerate(rows)
            )
            + "|}"
        )
        blocks.append("== Works ==\n" + table)
    if e.kind == "organisation":
        blocks.append(
            '== Key figures ==\n{| class="wikitable"\n! Year !! Employees\n|-\n| '
            + e.facts["employees_year"]
            + " || "
            + e.facts["employees"]
            + "\n|}"
        )
    if e.kind == "person" and "award" in e.facts:
        blocks.append(
            f"== Honours ==\n* {e.facts['award']} ({e.facts['award_year']})\n* Freedom of [[{e.facts['birthplace']}]]"
        )
    return blocks


@dataclass
class Article:
    entity: Entity
    wikitext: str
    paragraphs: list[tuple[str, list]]  # (plain text, fact spans) of each prose paragraph


def write_article(w: World, e: Entity, rng: random.Random) -> Article:
    refs: dict[str, str] = {}
    sections = PARAGRAPHS[e.kind](w, e, rng, refs)
    sections.append((WIKI_CONTEXT_HEADING[e.kind], context_paragraph(w, e, rng)))
    short = {
        "person": f"{e.facts.get('occupation', '').capitalize()}",
        "town": f"Town in {e.facts.get('country')}",
    }.get(e.kind, e.kind.capitalize())
    parts = [f"{{{{Short description|{short}}}}}\n{{{{Use dmy dates|date=January 2026}}}}\n" + infobox(e)]
    for heading, para in sections:
        parts.append((f"== {heading} ==\n" if heading else "") + para.wiki)
    parts.extend(extra_blocks(w, e, rng))
    parts.append("== References ==\n{{Reflist}}")
    parts.append("\n".join(f"[[Category:{c}]]" for c in categories(e)))
    return Article(e, "\n\n".join(parts), [para.plain_and_spans() for _, para in sections])
