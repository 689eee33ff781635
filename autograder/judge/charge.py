"""The charge: each cause once, in the part that owns it (rubric.CAUSE_OWNERS).

A part's *ledger* holds its findings and how many of its outputs were checked; ``charge`` turns every
part's ledger into its *verdict*: the message that fails it, or the notes of mistakes another part
charged.
"""
from __future__ import annotations

import dataclasses
import re

from rmsnorm_testkit import diagnose

from ..rubric import CAUSE_FAMILIES, CAUSE_OWNERS, NEVER_EXCUSED, OWNER_ONLY, PARTS, SHOWN_AS, SUBMISSION_RULES

Finding = diagnose.Finding
# the outputs whose values each formula's item owns: item 1 y and r, item 2 dx
OUTPUTS_OF = {CAUSE_OWNERS[cause]: outputs for cause, outputs in OWNER_ONLY.items()}


@dataclasses.dataclass
class Ledger:
    """What one part found: its findings, and how many of its outputs were checked."""
    findings: list = dataclasses.field(default_factory=list)
    checked: int = 0

    def right(self):
        self.checked += 1

    def add(self, finding: Finding | None):
        if finding is None:
            self.right()
            return
        self.findings.append(finding)
        self.checked += finding.checked

    def extend(self, other: "Ledger"):
        """Take another ledger's findings and checks after this one's."""
        self.findings += other.findings
        self.checked += other.checked


@dataclasses.dataclass
class Verdict:
    failure: str | None                              # why the part scores 0, or None
    notes: list                                      # findings charged in another part


def charge(ledgers: dict) -> dict:
    """{part: Verdict} from {part: Ledger}."""
    owner = owners(ledgers)
    verdicts = {}
    for part, L in ledgers.items():
        here = [f for f in L.findings if part in NEVER_EXCUSED or owner.get(f.cause, part) == part]
        here += _rules_found_elsewhere(ledgers, part, here)
        elsewhere = [f for f in L.findings if f not in here]
        # the message: a cause this part owns, and one the diagnosis could check, first
        here.sort(key=lambda f: (CAUSE_OWNERS.get(f.cause) != part, not f.checked))
        if here:
            verdicts[part] = Verdict(here[0].message, [])
        elif elsewhere and not L.checked:                # nothing of this part's own could be checked
            verdicts[part] = Verdict(elsewhere[0].message, [])
        else:
            verdicts[part] = Verdict(None, [f.message + _charged_in(f, owner) for f in elsewhere])
    return verdicts


# A kernel's crash, as the judge's record names it (job/wire/errors.Crash.site): its type, the function and line of
# rmsnorm.py it was running, and the kernel launched where that function was a helper
CRASH = re.compile(r"^error: (\w+) in (\w+) line (\d+)(?: in a launch of (\w+))?$")


# A race between two programs' stores, as the simulator words it: the line of the store
STORE_RACE = re.compile(r"both write [^()]+ \((\w+) line (\d+)\)")


def one_crash(ledgers: dict) -> dict:
    """The ledgers with each crash named as one mistake: the same error at one line (a helper several kernels call)
    or anywhere in one kernel's launch (a row index one too low faults at x's load at one shape, at r's on the path
    long rows take) is one crash, named by where it was met first, in the rubric's order. A race between the stores
    of a line whose stores also fall outside their tensor (a row's address computed wrong: two programs meet at
    one shape, the last runs past the end at another) is that crash too."""
    parent = {}

    def find(k):
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k
    first = {}
    for part in sorted(ledgers, key=lambda p: list(PARTS).index(p) if p in PARTS else len(PARTS)):
        for f in ledgers[part].findings:
            m = CRASH.match(f.cause or "")
            if m:
                kind, func, line, launched = m.groups()
                a, b = find(("line", kind, func, line)), find(("kernel", kind, launched or func))
                if a != b:
                    parent[b] = a
                first.setdefault(("line", kind, func, line), f.cause)
    if not first:
        return ledgers
    name = {}
    for key, cause in first.items():                  # in the order met: the first of each crash names it
        name.setdefault(find(key), cause)
    def renamed(f):
        m = CRASH.match(f.cause or "")
        if m:
            return dataclasses.replace(f, cause=name[find(("line", *m.groups()[:3]))])
        race = STORE_RACE.search(f.message) if f.cause == "race" else None
        key = race and ("line", "OutOfBoundsError", *race.groups())
        return dataclasses.replace(f, cause=name[find(key)]) if key in first else f
    for L in ledgers.values():
        L.findings = [renamed(f) for f in L.findings]
    return ledgers


def _rules_found_elsewhere(ledgers: dict, part: str, here: list) -> list:
    """The first finding of each submission-wide rule this part owns, when other parts found it and this one
    did not (SUBMISSION_RULES)."""
    mine = {f.cause for f in here}
    first = {}
    for L in ledgers.values():
        for f in L.findings:
            if f.cause in SUBMISSION_RULES and CAUSE_OWNERS[f.cause] == part and f.cause not in mine:
                first.setdefault(f.cause, f)
    return list(first.values())


def owners(ledgers: dict) -> dict:
    """{cause: the part that charges it}: the part the rubric names, when that part found it (or found it under
    another name, by the rubric's rules beside CAUSE_OWNERS); else the first part, in the rubric's order, that did
    (a dx with NaN charges item 2 when the forward is fine)."""
    seen = {}
    for part in (p for p in PARTS if p in ledgers):
        if part in NEVER_EXCUSED:
            continue
        for f in ledgers[part].findings:
            if f.cause:
                seen.setdefault(f.cause, []).append(part)
    def found_by_owner(cause, parts):
        owner = CAUSE_OWNERS.get(cause)
        if owner in ledgers and cause in SUBMISSION_RULES:
            return True                                  # charged in its owner wherever it showed
        if owner in OUTPUTS_OF and owner in ledgers and any(
                f.output in OUTPUTS_OF[owner] and CAUSE_OWNERS.get(f.cause) == owner for f in ledgers[owner].findings):
            return True                     # item 1 (2) found y or r (dx) wrong, for a cause of its own
        if cause in OWNER_ONLY:
            return False
        return owner in parts or (owner in ledgers and any(f.cause in CAUSE_FAMILIES.get(cause, ())
                                                           for f in ledgers[owner].findings))
    charged = {}
    for cause, parts in seen.items():
        if found_by_owner(cause, parts):
            charged[cause] = CAUSE_OWNERS.get(cause)
        elif cause not in OWNER_ONLY:                # an OWNER_ONLY cause its owner missed: each finder's own
            charged[cause] = parts[0]
    for cause, other in SHOWN_AS.items():         # the other's mistake, where the other's owner found that
        if cause in charged and CAUSE_OWNERS[other] in seen.get(other, ()):
            charged[cause] = CAUSE_OWNERS[other]
    return charged


def _charged_in(f: Finding, owner: dict) -> str:
    part = owner[f.cause]
    return f" (that mistake is charged once, in part {part}: {PARTS[part].name})"


def note(verdict: Verdict) -> str:
    """What a passing part says: nothing, or the mistakes it did not charge."""
    if not verdict.notes:
        return ""
    more = f" (and {len(verdict.notes) - 1} more like it)" if len(verdict.notes) > 1 else ""
    return "Full points here. " + verdict.notes[0] + more
