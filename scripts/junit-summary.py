"""junit-summary.py XML... — add up JUnit reports (ctest, pytest, fuzz-smoke) and print one
line per report and the closing "N passed, N failed, N skipped" line. Exits 1 when anything
failed or a report is missing or unreadable."""
import sys
import xml.etree.ElementTree as ET


def count(path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    passed = failed = skipped = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
                skipped += 1
            else:
                passed += 1
    return passed, failed, skipped


def main(paths):
    total = [0, 0, 0]
    bad = False
    for path in paths:
        try:
            p, f, s = count(path)
        except (OSError, ET.ParseError) as exc:
            print(f"{path}: unreadable report: {exc}")
            bad = True
            continue
        print(f"  {path.rsplit('/', 1)[-1]}: {p} passed, {f} failed, {s} skipped")
        total = [total[0] + p, total[1] + f, total[2] + s]
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if bad or total[1] or total[0] == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
