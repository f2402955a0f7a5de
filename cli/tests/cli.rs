//! End-to-end tests of the CLI (`asof query`, `sql`, `verify`, `build-sample`, `files`, `poll`,
//! `poll --backfill`, killed and resumed) against
//! the shipped sample corpus, spawning the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn asof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_asof"))
        .args(args)
        .env("ASOF_LOG", "error")
        .output()
        .expect("asof runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    assert!(o.status.code().is_some(), "killed");
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            stdout(o),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn committed_version() -> String {
    std::fs::read_to_string(repo().join("manifests/CURRENT"))
        .unwrap()
        .trim()
        .to_owned()
}

fn ids(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn build_sample_reproduces_the_committed_corpus_version() {
    let out = tempfile::tempdir().unwrap();
    let o = asof(&["build-sample", "--out", out.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let last = stdout(&o).lines().last().unwrap().to_owned();
    assert_eq!(last, committed_version());
    // The sample is one version of its own: a corpus already there is refused, untouched.
    let again = asof(&["build-sample", "--out", out.path().to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds a corpus"), "{err}");
    let current = std::fs::read_to_string(out.path().join("manifests/CURRENT")).unwrap();
    assert_eq!(current.trim(), committed_version());
}

#[test]
fn verify_passes_on_the_shipped_corpus() {
    let o = asof(&["verify"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o).lines().last().unwrap(), committed_version());
}

/// Copies the objects the committed manifest lists (not the Delta logs) into `dst`, and
/// returns that manifest.
fn copy_of_listed_objects(dst: &std::path::Path) -> Value {
    let src = repo();
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(src.join(format!("manifests/{}.json", &committed_version()[7..]))).unwrap(),
    )
    .unwrap();
    for entry in [
        "manifests/CURRENT".to_owned(),
        format!("manifests/{}.json", &committed_version()[7..]),
    ]
    .into_iter()
    .chain(
        manifest["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["path"].as_str().unwrap().to_owned()),
    )
    .chain(
        ["identity", "access"]
            .iter()
            .flat_map(|k| manifest[*k].as_array().unwrap().iter())
            .map(|p| p["path"].as_str().unwrap().to_owned()),
    ) {
        let to = dst.join(&entry);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(&entry), &to).unwrap();
    }
    manifest
}

#[test]
fn delta_backfill_writes_the_committed_logs_again_byte_for_byte_and_verify_re_derives_them() {
    let copy = tempfile::tempdir().unwrap();
    let manifest = copy_of_listed_objects(copy.path());
    // Every table the sample's manifest records: records, rule tables and identity, each at
    // version 0 (the sample ships one version).
    let tables: Vec<String> = manifest["delta"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let n = tables.len();
    assert!(
        n > 9,
        "the rule and identity tables are Delta tables too: {tables:?}"
    );
    assert!(tables.iter().any(|t| t == "identity"));
    assert!(
        tables
            .iter()
            .any(|t| t == "sec.edgar/certified_pit/supersessions")
    );
    let corpus = copy.path().to_str().unwrap();
    let before = asof(&["verify", "--corpus", corpus]);
    assert!(
        before.status.success(),
        "a log behind its pointer is not a fault"
    );
    assert!(
        stdout(&before).contains(&format!("{n} commits not written yet")),
        "{}",
        stdout(&before)
    );
    let b = asof(&["delta", "backfill", "--corpus", corpus]);
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert!(stdout(&b).starts_with(&format!("wrote {n} Delta commits for 1 corpus versions")));
    let after = asof(&["verify", "--corpus", corpus]);
    assert!(stdout(&after).contains(&format!(
        "{n} Delta tables, {n} commits re-derived and equal"
    )));
    let again = asof(&["delta", "backfill", "--corpus", corpus]);
    assert!(stdout(&again).starts_with("wrote 0 Delta commits"));
    // The commits follow from the manifest alone: the same bytes as the committed logs.
    for key in &tables {
        let root = match key.split('/').collect::<Vec<_>>()[..] {
            ["identity"] => "snapshots/identity".to_owned(),
            [s, l] => format!("snapshots/partitions/{s}/{l}"),
            [s, l, t] => format!("snapshots/rule/{s}/{l}/{t}"),
            _ => panic!("a table key of another shape: {key}"),
        };
        let rel = format!("{root}/_delta_log/00000000000000000000.json");
        assert_eq!(
            std::fs::read(copy.path().join(&rel)).unwrap(),
            std::fs::read(repo().join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}")),
            "{rel}"
        );
    }
}

#[test]
fn verify_fails_on_a_corrupted_copy_and_names_the_partition() {
    let copy = tempfile::tempdir().unwrap();
    let manifest = copy_of_listed_objects(copy.path());
    let victim = manifest["partitions"][7]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let corpus = copy.path().to_str().unwrap();
    assert!(
        asof(&["verify", "--corpus", corpus]).status.success(),
        "the untouched copy verifies"
    );
    let path = copy.path().join(&victim);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    let o = asof(&["verify", "--corpus", corpus]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&victim), "{err}");
}

#[test]
fn query_answers_teslas_filings_as_of_an_instant_matching_the_raw_submissions() {
    // From snapshots/sources/sec.edgar/submissions/CIK0001318605__20260203T120702Z.json:
    // 0001628280-26-003837 8-K accepted 2026-01-28T21:11:04Z, 0001628280-26-003952 10-K
    // accepted 2026-01-29T01:55:03Z.
    let v = json(&asof(&[
        "query",
        "--ticker",
        "TSLA",
        "--as-of",
        "2026-01-29T12:00:00Z",
        "--limit",
        "1000",
    ]));
    assert_eq!(v["status"], "ok");
    assert_eq!(v["corpus_version"], committed_version().as_str());
    let rows = v["results"].as_array().unwrap();
    let last = &rows[rows.len() - 1];
    assert_eq!(last["id"], "0001628280-26-003952_1318605");
    assert_eq!(last["form"], "10-K");
    assert_eq!(last["acceptance_at"], "2026-01-29T01:55:03Z");
    assert_eq!(last["published_at"], "2026-01-29T01:55:03Z");
    assert_eq!(
        last["available_at"],
        Value::Null,
        "available_at is never imputed"
    );
    assert_eq!(
        last["source_locator"],
        "https://www.sec.gov/Archives/edgar/data/1318605/000162828026003952/tsla-20251231.htm"
    );
    assert_eq!(rows[rows.len() - 2]["id"], "0001628280-26-003837_1318605");
    assert_eq!(v["count"].as_u64().unwrap() as usize, rows.len());
    assert!(
        v["coverage"]["touched"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "identity.ticker/TSLA@2026-01-29")
    );

    // One second before the 8-K's acceptance it is not knowable.
    let before = json(&asof(&[
        "query",
        "--cik",
        "0001318605",
        "--as-of",
        "2026-01-28T21:11:03Z",
        "--limit",
        "1000",
    ]));
    assert!(!ids(&before).contains(&"0001628280-26-003837_1318605".to_owned()));
}

#[test]
fn query_diff_lists_only_what_became_knowable_in_the_window() {
    let v = json(&asof(&[
        "query",
        "--cik",
        "1318605",
        "--since",
        "2026-01-27T00:00:00Z",
        "--as-of",
        "2026-01-29T12:00:00Z",
    ]));
    assert_eq!(
        ids(&v),
        vec![
            "0001628280-26-003837_1318605",
            "0001628280-26-003952_1318605"
        ]
    );
    let edge = json(&asof(&[
        "query",
        "--cik",
        "1318605",
        "--since",
        "2026-01-28T21:11:04Z",
        "--as-of",
        "2026-01-29T12:00:00Z",
    ]));
    assert_eq!(
        ids(&edge),
        vec!["0001628280-26-003952_1318605"],
        "a row visible at the start is excluded"
    );
}

#[test]
fn query_after_the_certified_span_is_a_hole_with_exit_code_3() {
    let o = asof(&[
        "query",
        "--cik",
        "1318605",
        "--as-of",
        "2026-03-01T00:00:00Z",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert_eq!(v["status"], "coverage_missing");
    assert_eq!(v["count"], Value::Null);
    assert_eq!(v["coverage"]["missing"][0], "sec.edgar/2026-02-08");
    assert_eq!(v["coverage"]["missing_total"], 22);
    // The API's own error envelope: the same code, message and members.
    assert_eq!(v["error"]["code"], "coverage_missing");
    assert_eq!(v["results"], serde_json::json!([]));
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert_eq!(v["as_of"], "2026-03-01T00:00:00Z");
}

#[test]
fn query_far_past_the_span_lists_the_documented_32_missing_keys_and_counts_them_all() {
    for since in [None, Some("2026-01-01T00:00:00Z")] {
        let mut args = vec!["query", "--as-of", "2099-01-01T00:00:00Z"];
        if let Some(s) = since {
            args.extend(["--since", s]);
        }
        let o = asof(&args);
        assert_eq!(o.status.code(), Some(3));
        let v = json(&o);
        assert_eq!(v["coverage"]["missing"].as_array().unwrap().len(), 32);
        assert!(v["coverage"]["missing_total"].as_u64().unwrap() > 32);
    }
}

#[test]
fn query_for_a_ticker_no_interval_places_is_an_identity_hole() {
    let o = asof(&[
        "query",
        "--ticker",
        "SMEGF",
        "--as-of",
        "2026-01-28T00:00:00Z",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        json(&o)["coverage"]["missing"][0],
        "identity.ticker/SMEGF@2026-01-28"
    );
    let placed = json(&asof(&[
        "query",
        "--ticker",
        "SMEGF",
        "--as-of",
        "2026-02-03T00:00:00Z",
    ]));
    assert_eq!(placed["status"], "ok");
    // From CIK0001830056__20260208T202041Z.json: F-6 accepted 2026-01-16, EFFECT 2026-02-02.
    // SEC's ticker list of 2026-02-01, the first to show SMEGF, places the ticker (it is
    // identity evidence) and is no record of its own.
    assert_eq!(
        ids(&placed),
        vec![
            "0001193805-26-000032_1830056",
            "9999999995-26-000414_1830056"
        ]
    );
    for r in placed["results"].as_array().unwrap() {
        assert!(
            r["accession"].is_string(),
            "an EDGAR record is a filing: {r}"
        );
    }
}

#[test]
fn query_refuses_offsets_and_bare_dates_saying_which() {
    let o = asof(&[
        "query",
        "--cik",
        "1318605",
        "--as-of",
        "2026-01-29T12:00:00+01:00",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("numeric UTC offset"));
    let o = asof(&["query", "--cik", "1318605", "--as-of", "2026-01-29"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("bare date"));
}

#[test]
fn every_edgar_record_of_the_shipped_sample_is_a_filing_with_its_accession() {
    // Ticker lists are identity evidence (docs/sources.md): no `ticker.*` record, and every
    // `sec.edgar` row, in either lane, carries the accession number the contract promises.
    let o = asof(&[
        "sql",
        "--format",
        "json",
        "SELECT count(*) AS n, count(accession) AS with_accession, \
         sum(CASE WHEN form LIKE 'ticker.%' THEN 1 ELSE 0 END) AS ticker_rows \
         FROM news WHERE source_id = 'sec.edgar'",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v[0];
    assert!(row["n"].as_i64().unwrap() > 10_000, "{row}");
    assert_eq!(row["with_accession"], row["n"], "{row}");
    assert_eq!(row["ticker_rows"].as_i64().unwrap_or(0), 0, "{row}");
}

#[test]
fn committed_at_revisions_of_a_disputed_acceptance_time_are_both_held() {
    // Alzamend's 2026-03-10 capture lists acceptance 16:46:18Z for 0001214659-26-002941, the
    // 2026-06-20 capture 21:46:18Z: the later capture supersedes, both stay queryable by SQL.
    let o = asof(&[
        "sql",
        "--format",
        "json",
        "SELECT revision_id, supersedes, acceptance_at, committed_at FROM news WHERE id = '0001214659-26-002941_1677077' ORDER BY committed_at",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["supersedes"], rows[0]["revision_id"]);
}

#[test]
fn sql_refuses_statements_that_are_not_read_only() {
    for stmt in [
        "DROP TABLE news",
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO news SELECT * FROM news",
        "SET datafusion.execution.batch_size = 1",
    ] {
        let o = asof(&["sql", stmt]);
        assert!(!o.status.success(), "{stmt} was accepted");
    }
    let o = asof(&[
        "sql",
        "--format",
        "csv",
        "SELECT count(*) AS n FROM partitions",
    ]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("n\n"));
}

#[test]
fn every_example_of_the_sql_page_runs_on_the_shipped_sample() {
    // docs/sql.md's ```sql blocks, each one statement; a block opening with `-- fails: X`
    // must fail saying X. The page stays true or this fails.
    let page = std::fs::read_to_string(repo().join("docs/sql.md")).unwrap();
    let blocks: Vec<&str> = page
        .split("```sql\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert!(blocks.len() >= 8, "the page's examples: {}", blocks.len());
    for block in blocks {
        let o = asof(&["sql", "--format", "csv", block]);
        let err = String::from_utf8_lossy(&o.stderr);
        match block.strip_prefix("-- fails: ") {
            Some(rest) => {
                let says = rest.lines().next().unwrap();
                assert!(!o.status.success(), "{block} succeeded");
                assert!(err.contains(says), "{block}: {err}");
            }
            None => {
                assert!(o.status.success(), "{block}: {err}");
                assert!(
                    stdout(&o).lines().count() >= 2,
                    "{block} answers at least one row: {}",
                    stdout(&o)
                );
            }
        }
    }
}

#[test]
fn sql_counts_and_groups_the_sample_within_a_memory_bound() {
    // Peak resident memory of the whole process, as `--stats` reads it from the kernel: a
    // query's memory is bounded by its batches and its operators' pool, not by the corpus.
    if !Path::new("/proc/self/status").exists() {
        eprintln!("SKIPPED: no /proc here to read peak memory from");
        return;
    }
    for (query, pool) in [
        ("SELECT count(*) AS n FROM news", "512"),
        (
            "SELECT cik, form, count(*) AS n FROM news GROUP BY cik, form ORDER BY n DESC",
            "64",
        ),
    ] {
        let o = asof(&[
            "sql",
            "--stats",
            "--memory-limit-mb",
            pool,
            "--format",
            "csv",
            query,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        let peak: u64 = err
            .split("peak resident memory ")
            .nth(1)
            .and_then(|r| r.split(" MiB").next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("--stats reports the peak: {err}"));
        assert!(peak < MEMORY_BOUND_MIB, "{query}: {peak} MiB");
    }
}

/// What an `asof sql` process may hold at its peak over the shipped sample (50k rows, 18 MB
/// of partitions).
const MEMORY_BOUND_MIB: u64 = 256;

/// Runs `cmd` with `input` on its standard input (and quiet logs), to its end.
fn with_input(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = cmd
        .env("ASOF_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `asof sql --format csv` at a terminal (`script` gives it one, as a person typing
/// would have) and types each of `lines` once the prompt asks for it: the line editor reads
/// what is typed at its prompt, so nothing is sent ahead. Answers what the terminal showed.
fn at_a_terminal(env: &[(&str, &std::ffi::OsStr)], lines: &[&[u8]]) -> (bool, String) {
    use std::io::{Read as _, Write as _};
    use std::sync::{Arc, Mutex};
    let cmd = format!("{} sql --format csv", env!("CARGO_BIN_EXE_asof"));
    let mut c = Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"]).env("ASOF_LOG", "error");
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let shown = Arc::new(Mutex::new(Vec::new()));
    let mut out = child.stdout.take().unwrap();
    let into = shown.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let prompts = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        t.matches("asof> ").count() + t.matches("...> ").count()
    };
    let mut stdin = child.stdin.take().unwrap();
    for (i, line) in lines.iter().enumerate() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while prompts(&shown.lock().unwrap()) <= i {
            assert!(
                std::time::Instant::now() < deadline,
                "no prompt for line {i}: {}",
                String::from_utf8_lossy(&shown.lock().unwrap())
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stdin.write_all(line).unwrap();
        stdin.flush().unwrap();
    }
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    let text = String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
    (status.success(), text)
}

#[test]
fn sql_without_a_statement_answers_each_statement_of_a_script_on_standard_input() {
    // A `;` inside a string does not end a statement; a failing statement is reported and
    // the script goes on; the exit status says one failed.
    let o = with_input(
        Command::new(env!("CARGO_BIN_EXE_asof")).args(["sql", "--format", "csv"]),
        b"SELECT 1 AS a;\nSELECT 'x;y' AS b; SELECT nope FROM news;\nSELECT 2 AS c;\n",
    );
    assert_eq!(stdout(&o), "a\n1\nb\nx;y\nc\n2\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    assert!(!o.status.success());
}

#[test]
fn sql_at_a_terminal_opens_a_prompt_that_takes_statements_over_several_lines() {
    // `script` gives the process a terminal, as a person typing would.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no `script` to run the prompt in a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let (ok, shown) = at_a_terminal(
        &[("ASOF_SQL_HISTORY", history.as_os_str())],
        &[b"SELECT 40 +\r", b" 2 AS answer;\r", b".quit\r"],
    );
    assert!(ok, "{shown}");
    assert!(shown.contains("asof>"), "a prompt: {shown}");
    assert!(shown.contains("answer") && shown.contains("42"), "{shown}");
    // The statement is kept in the history file, whole, on one line.
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains("SELECT 40 + 2 AS answer;"), "{kept}");
}

#[test]
fn the_sql_prompt_recalls_a_statement_of_an_earlier_session_with_the_up_arrow() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no `script` to run the prompt in a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    std::fs::write(&history, "SELECT 6 * 7 AS recalled;\n").unwrap();
    // The up arrow (ESC [ A) brings back the last statement; Enter runs it.
    let (ok, shown) = at_a_terminal(
        &[("ASOF_SQL_HISTORY", history.as_os_str())],
        &[b"\x1b[A\r", b".quit\r"],
    );
    assert!(ok, "{shown}");
    assert!(
        shown.contains("recalled") && shown.contains("42"),
        "the recalled statement ran: {shown}"
    );
    // An empty ASOF_SQL_HISTORY keeps none.
    let (ok, shown) = at_a_terminal(
        &[
            ("ASOF_SQL_HISTORY", std::ffi::OsStr::new("")),
            ("HOME", dir.path().as_os_str()),
        ],
        &[b"SELECT 1 AS one;\r", b".quit\r"],
    );
    assert!(ok, "{shown}");
    assert!(!dir.path().join(".asof_sql_history").exists());
}

#[test]
fn sql_shows_progress_on_standard_error_and_a_last_line_when_asked_always() {
    let o = asof(&[
        "sql",
        "--format",
        "csv",
        "--progress",
        "always",
        "SELECT form, count(*) AS n FROM news GROUP BY form ORDER BY n DESC LIMIT 3",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(stdout(&o).lines().count(), 4, "{}", stdout(&o));
    // The last line says what the query read: the partitions' bytes, not nothing.
    let last = err
        .lines()
        .rfind(|l| l.starts_with("progress: done"))
        .unwrap_or_else(|| panic!("a last progress line: {err}"));
    assert!(last.contains("3 row(s)"), "{last}");
    assert!(!last.contains(" 0 B read"), "{last}");
    // Never: no line at all; and not at a pipe by default.
    for mode in [&["--progress", "never"][..], &[]] {
        let mut args = vec!["sql", "--format", "csv"];
        args.extend_from_slice(mode);
        args.push("SELECT count(*) FROM news WHERE form = '8-K'");
        let o = asof(&args);
        assert!(o.status.success());
        assert!(!String::from_utf8_lossy(&o.stderr).contains("progress"));
    }
}

#[test]
fn sql_writes_an_answer_to_a_parquet_file_only_once_it_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("forms.parquet");
    let out_s = out.to_str().unwrap();
    let o = asof(&["sql", "--format", "parquet", "SELECT 1 AS x"]);
    assert!(!o.status.success(), "parquet without --out is refused");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out"));
    let query = "SELECT form, count(*) AS n FROM news_asof('2026-01-29T12:00:00Z') \
                 GROUP BY form ORDER BY n DESC, form";
    let o = asof(&["sql", "--format", "parquet", "--out", out_s, query]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Read back: the same answer as CSV to standard output.
    let file = std::fs::File::open(&out).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let mut csv = Vec::new();
    {
        let mut w = arrow::csv::Writer::new(&mut csv);
        for b in &batches {
            w.write(b).unwrap();
        }
    }
    let o = asof(&["sql", "--format", "csv", query]);
    assert_eq!(String::from_utf8(csv).unwrap(), stdout(&o));
    assert!(stdout(&o).lines().count() > 2);
    // A query that fails while its answer is being written (a cast that fails on a row)
    // leaves the file as it was and no stray file.
    let before = std::fs::read(&out).unwrap();
    let o = asof(&[
        "sql",
        "--format",
        "parquet",
        "--out",
        out_s,
        "SELECT id, CAST(title AS INT) AS n FROM news",
    ]);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no partial file left"
    );
}

#[test]
fn sql_reads_only_the_manifest_and_the_partitions_never_the_versions_indexes() {
    // A copy holding the manifest and the partitions only: no identity file, access file,
    // id run or late object, which the service's load of a version needs and SQL does not.
    let dir = tempfile::tempdir().unwrap();
    let manifest = copy_of_listed_objects(dir.path());
    for sub in ["identity", "access", "ids", "late", "lists"] {
        let _ = std::fs::remove_dir_all(dir.path().join("snapshots").join(sub));
    }
    let rows: u64 = manifest["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["row_count"].as_u64().unwrap())
        .sum();
    let corpus = dir.path().to_str().unwrap();
    let o = asof(&[
        "sql",
        "--corpus",
        corpus,
        "--format",
        "csv",
        "SELECT count(*) AS n FROM news",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), format!("n\n{rows}\n"));
    // The service cannot load that copy: it is what SQL no longer pays for.
    let o = asof(&[
        "query",
        "--corpus",
        corpus,
        "--cik",
        "1318605",
        "--as-of",
        "2026-01-29T12:00:00Z",
    ]);
    assert!(!o.status.success());
}

#[test]
fn bench_corpus_is_deterministic_by_seed_and_answers_queries() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let build = |dir: &tempfile::TempDir| {
        let args = [
            "bench-corpus",
            "--rows",
            "3000",
            "--days",
            "90",
            "--ciks",
            "40",
            "--seed",
            "5",
            "--out",
            dir.path().to_str().unwrap(),
        ];
        let o = asof(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stdout(&o).lines().last().unwrap().to_owned()
    };
    let version = build(&a);
    assert!(version.starts_with("sha256:"), "{version}");
    assert_eq!(
        build(&b),
        version,
        "same spec and seed, same corpus_version"
    );
    let corpus = a.path().to_str().unwrap();
    assert!(asof(&["verify", "--corpus", corpus]).status.success());
    // The top-ranked filer (CIK 1000) has rows; the last two days are uncertified (exit 3).
    let o = asof(&[
        "query",
        "--corpus",
        corpus,
        "--cik",
        "1000",
        "--as-of",
        "2026-01-29T23:00:00Z",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let body: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(body["count"].as_u64().unwrap() > 0, "{body}");
    let o = asof(&[
        "query",
        "--corpus",
        corpus,
        "--cik",
        "1000",
        "--as-of",
        "2026-01-31T12:00:00Z",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a cut on an uncertified day is a hole"
    );
    // A second build into a corpus that already holds one is refused, not merged.
    let o = asof(&[
        "bench-corpus",
        "--rows",
        "10",
        "--days",
        "5",
        "--ciks",
        "2",
        "--out",
        corpus,
    ]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn ingest_publishes_a_version_then_refuses_a_corrupt_file_leaving_it_current() {
    let out = tempfile::tempdir().unwrap();
    let corpus = out.path().join("corpus");
    let corpus = corpus.to_str().unwrap();
    let src = repo().join("snapshots/sources/sec.edgar/daily-index/company.20221003.idx");
    let src = src.to_str().unwrap();
    let o = asof(&[
        "ingest",
        "--corpus",
        corpus,
        "--source",
        "sec.edgar",
        "--commit-time",
        "2022-10-04T06:00:00Z",
        src,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let version = stdout(&o).lines().last().unwrap().to_owned();
    assert!(version.starts_with("sha256:"), "{version}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("4909 new rows") && stderr.contains("certified 2022-10-03"),
        "{stderr}"
    );

    // The same file again: nothing new, same version, exit 0.
    let again = asof(&[
        "ingest",
        "--corpus",
        corpus,
        "--source",
        "sec.edgar",
        "--commit-time",
        "2022-10-05T06:00:00Z",
        src,
    ]);
    assert!(again.status.success());
    assert_eq!(stdout(&again).lines().last().unwrap(), version);

    // A malformed date: exit 1, the error names the file and line, the version stays current.
    let bytes = std::fs::read(src).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let bad = out.path().join("company.20221004.idx");
    std::fs::write(&bad, text.replacen("20221003 ", "20221O03 ", 1)).unwrap();
    let refused = asof(&[
        "ingest",
        "--corpus",
        corpus,
        "--source",
        "sec.edgar",
        "--commit-time",
        "2022-10-05T06:00:00Z",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("company.20221004.idx") && err.contains("line"),
        "{err}"
    );
    let current = std::fs::read_to_string(Path::new(corpus).join("manifests/CURRENT")).unwrap();
    assert_eq!(current.trim(), version);
}

#[test]
fn ingest_refuses_an_unknown_source_and_a_bad_commit_time() {
    let out = tempfile::tempdir().unwrap();
    let corpus = out.path().to_str().unwrap();
    let src = repo().join("snapshots/sources/sec.edgar/daily-index/company.20221003.idx");
    let o = asof(&[
        "ingest",
        "--corpus",
        corpus,
        "--source",
        "sec.gov",
        src.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("us.ofac.sdn"),
        "lists the valid set"
    );
    let o = asof(&[
        "ingest",
        "--corpus",
        corpus,
        "--source",
        "sec.edgar",
        "--commit-time",
        "2022-10-04T06:00:00+02:00",
        src.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("commit-time"));
}

#[test]
fn ingest_reads_a_golden_copy_at_the_instant_its_name_gives() {
    let out = tempfile::tempdir().unwrap();
    let corpus = out.path().join("corpus");
    let file = repo().join(
        "snapshots/sources/gleif.lei/golden_copy_from_api/20250515-0000-gleif-goldencopy-lei2-golden-copy.csv",
    );
    let run = |extra: &[&str]| {
        let mut args = vec![
            "ingest",
            "--corpus",
            corpus.to_str().unwrap(),
            "--source",
            "gleif.lei",
            "--commit-time",
            "2025-05-16T00:00:00Z",
        ];
        args.extend(extra);
        args.push(file.to_str().unwrap());
        asof(&args)
    };
    // No --captured-at: the name's 2025-05-15 00:00 is the capture, not the commit time.
    let a = run(&[]);
    let err = String::from_utf8_lossy(&a.stderr);
    assert!(a.status.success(), "{err}");
    assert!(
        err.contains("list changes: 94 added") && err.contains("certified 2025-05-15"),
        "{err}"
    );
    // A --captured-at that contradicts the name is refused, naming both.
    let b = run(&["--captured-at", "2025-05-15T08:00:00Z"]);
    let err = String::from_utf8_lossy(&b.stderr);
    assert!(!b.status.success());
    assert!(err.contains("give one or the other"), "{err}");
}

#[test]
fn ingest_flags_hold_rows_uncertified_take_identity_only_and_publish_a_note_and_sample_set() {
    let out = tempfile::tempdir().unwrap();
    let corpus = out.path().join("corpus");
    let corpus = corpus.to_str().unwrap();
    let src = repo().join("snapshots/sources");
    let index = src.join("sec.edgar/daily-index/company.20221003.idx");
    let exchange = src.join("sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools/company_tickers_exchange_committed_2026-01-29.csv");
    let sample = out.path().join("sample.json");
    std::fs::write(
        &sample,
        r#"{"source_id":"sec.edgar","lane":"certified_pit","days":["2022-10-03"],"examples":[{"id":"apple","ticker":"AAPL","cik":"320193","name":"Apple Inc.","note":"one day of EDGAR"}]}"#,
    )
    .unwrap();
    let ingest = |extra: &[&str], f: &std::path::Path| {
        let mut args = vec![
            "ingest",
            "--corpus",
            corpus,
            "--source",
            "sec.edgar",
            "--commit-time",
            "2026-02-01T00:00:00Z",
        ];
        args.extend_from_slice(extra);
        args.push(f.to_str().unwrap());
        asof(&args)
    };
    let held = ingest(
        &[
            "--certify",
            "none",
            "--note",
            "One day of EDGAR, held, not certified.",
            "--sample-set",
            sample.to_str().unwrap(),
        ],
        &index,
    );
    assert!(
        held.status.success(),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
    let version = stdout(&held).lines().last().unwrap().to_owned();
    let manifest = |v: &str| -> Value {
        let digest = v.strip_prefix("sha256:").unwrap();
        let p = out.path().join(format!("corpus/manifests/{digest}.json"));
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let m = manifest(&version);
    assert_eq!(m["certifications"], serde_json::json!([]), "{m}");
    assert_eq!(
        m["notes"]["sec.edgar"],
        "One day of EDGAR, held, not certified."
    );
    assert_eq!(m["sample"]["examples"][0]["ticker"], "AAPL");
    assert_eq!(m["partitions"][0]["row_count"], 4909);

    // An exchange-form ticker list as identity only: no rows, the mapping answers from it.
    let identity = ingest(
        &["--identity-only", "--captured-at", "2026-01-29T23:59:59Z"],
        &exchange,
    );
    assert!(
        identity.status.success(),
        "{}",
        String::from_utf8_lossy(&identity.stderr)
    );
    let after = stdout(&identity).lines().last().unwrap().to_owned();
    let m2 = manifest(&after);
    assert_eq!(m2["partitions"], m["partitions"]);
    assert_eq!(m2["identity"].as_array().map(Vec::len), Some(1));

    // Bad flags are refused before anything is read, naming the flag.
    for (extra, says) in [
        (vec!["--since", "2026-13-01"], "--since"),
        (vec!["--certify", "nothing"], "--certify"),
        (
            vec!["--sample-set", "/nonexistent/sample.json"],
            "--sample-set",
        ),
        (vec!["--note", " "], "--note"),
    ] {
        let o = ingest(&extra, &index);
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    let bad = out.path().join("bad.json");
    std::fs::write(&bad, br#"{"source_id":"sec.edgar"}"#).unwrap();
    let o = ingest(&["--sample-set", bad.to_str().unwrap()], &index);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("missing field"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("corpus/manifests/CURRENT"))
            .unwrap()
            .trim(),
        after
    );
}

#[test]
fn ingest_certifies_stated_days_with_evidence_and_chains_versions_by_parent() {
    let out = tempfile::tempdir().unwrap();
    let corpus = out.path().join("corpus");
    let corpus = corpus.to_str().unwrap();
    let dir = repo().join("snapshots/sources/us.cftc.cot/legacy_futures_only_2025_weekly_asof");
    let first = dir.join("annual.txt.committed_2025-01-13");
    let second = dir.join("annual.txt.committed_2025-01-17");
    let run = |commit: &str, captured: &str, certify: &str, f: &std::path::Path| {
        asof(&[
            "ingest",
            "--corpus",
            corpus,
            "--source",
            "us.cftc.cot",
            "--lane",
            "certified_pit",
            "--commit-time",
            commit,
            "--captured-at",
            captured,
            "--certify",
            certify,
            f.to_str().unwrap(),
        ])
    };
    let a = run(
        "2025-01-14T00:00:00Z",
        "2025-01-13T23:00:02Z",
        "2025-01-13",
        &first,
    );
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let va = stdout(&a).lines().last().unwrap().to_owned();
    let b = run(
        "2025-01-18T00:00:00Z",
        "2025-01-17T23:00:02Z",
        "2025-01-14..2025-01-17",
        &second,
    );
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let vb = stdout(&b).lines().last().unwrap().to_owned();
    assert_ne!(va, vb);
    let manifest = |v: &str| -> Value {
        let digest = v.strip_prefix("sha256:").unwrap();
        let p = out.path().join(format!("corpus/manifests/{digest}.json"));
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let (ma, mb) = (manifest(&va), manifest(&vb));
    assert!(ma["parent"].is_null(), "the first version has no parent");
    assert_eq!(
        mb["parent"],
        va.as_str(),
        "the new version names the one it built on"
    );
    let certs = mb["certifications"].as_array().unwrap();
    let stated = certs
        .iter()
        .find(|c| c["from"] == "2025-01-14" && c["to"] == "2025-01-17")
        .unwrap_or_else(|| panic!("{certs:?}"));
    assert_eq!(stated["certified_at"], "2025-01-18T00:00:00Z");
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        std::fs::read(&second).unwrap(),
    ));
    assert_eq!(
        stated["evidence"][0]["file"], "annual.txt.committed_2025-01-17",
        "{stated}"
    );
    assert_eq!(stated["evidence"][0]["sha256"], sha.as_str(), "{stated}");
    // A stated day after the commit day is refused and nothing changes.
    let c = run(
        "2025-01-19T00:00:00Z",
        "2025-01-17T23:00:02Z",
        "2025-01-18..2025-01-20",
        &second,
    );
    assert_eq!(c.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&c.stderr).contains("after the commit day"),
        "{}",
        String::from_utf8_lossy(&c.stderr)
    );
    let current = std::fs::read_to_string(out.path().join("corpus/manifests/CURRENT")).unwrap();
    assert_eq!(current.trim(), vb);
}

#[test]
fn query_refuses_what_the_api_refuses_with_the_api_messages_under_flag_names() {
    let stderr = |args: &[&str]| {
        let o = asof(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let base = ["query", "--as-of", "2026-01-29T12:00:00Z"];
    let e = stderr(&[&base[..], &["--ticker", "NOT A TICKER!"]].concat());
    assert!(
        e.contains("--ticker: ticker must be 1 to 16 letters, digits, '.' or '-'"),
        "{e}"
    );
    let e = stderr(&[&base[..], &["--cik", "1318605", "--limit", "0"]].concat());
    assert!(
        e.contains("--limit: limit must be an integer from 1 to 1000"),
        "{e}"
    );
    let e = stderr(&[&base[..], &["--ticker", "TSLA", "--cik", "1318605"]].concat());
    assert!(e.contains("--cik: send ticker or cik, not both"), "{e}");
    let e = stderr(&[&base[..], &["--cik", "1318605", "--lane", "fast"]].concat());
    assert!(
        e.contains("--lane: lane must be one of: certified_pit"),
        "{e}"
    );
    let e = stderr(&[
        "query",
        "--cik",
        "1318605",
        "--as-of",
        "2026-01-29T12:00:00Z",
        "--since",
        "2026-01-30T00:00:00Z",
    ]);
    assert!(
        e.contains("--since: as_of_start must not be after as_of_end"),
        "{e}"
    );
}

#[test]
fn query_table_prints_the_status_as_the_api_spells_it() {
    let o = asof(&[
        "query",
        "--ticker",
        "TSLA",
        "--as-of",
        "2026-01-29T12:00:00Z",
        "--format",
        "table",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = stdout(&o).lines().next().unwrap().to_owned();
    assert!(first.ends_with("status ok"), "{first}");
}

#[test]
fn query_into_a_closed_pipe_exits_quietly() {
    use std::process::Stdio;
    for format in ["json", "csv", "table"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_asof"))
            .args([
                "query",
                "--ticker",
                "TSLA",
                "--as-of",
                "2026-01-29T12:00:00Z",
                "--limit",
                "1000",
                "--format",
                format,
            ])
            .env("ASOF_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| head -0`: the reader is gone before the first write.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {:?} {err}", out.status);
        assert!(err.is_empty(), "{format}: {err}");
    }
}

#[test]
fn files_lists_the_partitions_of_the_corpus_with_their_certificates() {
    let o = asof(&[
        "files",
        "--source",
        "sec.edgar",
        "--from",
        "2026-01-08",
        "--to",
        "2026-01-09",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    assert_eq!(v["corpus_version"], committed_version());
    let files = v["results"].as_array().unwrap();
    assert_eq!(v["count"], files.len());
    assert!(!files.is_empty());
    for f in files {
        assert_eq!(f["source_id"], "sec.edgar");
        assert!(["2026-01-08", "2026-01-09"].contains(&f["date"].as_str().unwrap()));
        assert_eq!(f["id"], f["sha256"]);
        assert_eq!(f["certified"], f["certified_row_count"].is_number());
        let bytes = std::fs::metadata(repo().join(f["path"].as_str().unwrap()))
            .unwrap()
            .len();
        assert_eq!(f["bytes"], bytes);
    }
    let o = asof(&["files", "--source", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--source"));
    let o = asof(&["files", "--from", "2026-02-01", "--to", "2026-01-01"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn files_download_verifies_every_file_and_keeps_none_that_fails() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let o = asof(&["files", "download", "--out", dir, "--source", "us.cftc.cot"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listing: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("files.json")).unwrap()).unwrap();
    let files = listing["results"].as_array().unwrap();
    assert!(!files.is_empty());
    for f in files {
        let p = out.path().join(format!(
            "us.cftc.cot/{}/{}/{}.parquet",
            f["lane"].as_str().unwrap(),
            f["date"].as_str().unwrap(),
            f["sha256"].as_str().unwrap()
        ));
        let bytes = std::fs::read(&p).unwrap();
        use sha2::Digest;
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&bytes)),
            f["sha256"].as_str().unwrap()
        );
    }
    // A corpus whose partition was altered on disk: the download refuses it and keeps nothing.
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .args([
            "-r",
            &format!("{}/manifests", repo().display()),
            &format!("{}/snapshots", repo().display()),
        ])
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let victim = copy.path().join(files[0]["path"].as_str().unwrap());
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    let out2 = tempfile::tempdir().unwrap();
    let o = asof(&[
        "files",
        "download",
        "--corpus",
        copy.path().to_str().unwrap(),
        "--out",
        out2.path().to_str().unwrap(),
        "--source",
        "us.cftc.cot",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("sha256"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let kept: Vec<_> = walk(out2.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet" || e == "part"))
        .collect();
    assert!(kept.is_empty(), "{kept:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A local EDGAR feed (the recorded pages) on a runtime that lives as long as the guard.
fn feed() -> (tokio::runtime::Runtime, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let base = rt.block_on(asof_test_support::feed::serve(
        asof_test_support::feed::three_pages(),
    ));
    (rt, base)
}

#[test]
fn poll_once_publishes_the_new_filings_and_then_nothing() {
    let (_rt, base) = feed();
    let corpus = tempfile::tempdir().unwrap();
    let dir = corpus.path().to_str().unwrap();
    let args = [
        "poll",
        "--once",
        "--corpus",
        dir,
        "--user-agent",
        "asof tests ops@example.com",
        "--edgar-base-url",
        &base,
    ];
    let o = asof(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let version = stdout(&o).trim().to_owned();
    assert!(version.starts_with("sha256:"), "{version}");
    let pointer = std::fs::read_to_string(corpus.path().join("manifests/CURRENT")).unwrap();
    assert_eq!(pointer.trim(), version);
    // Nothing new: no version printed, the pointer stays.
    let o = asof(&args);
    assert!(o.status.success());
    assert_eq!(stdout(&o).trim(), "");
    let again = std::fs::read_to_string(corpus.path().join("manifests/CURRENT")).unwrap();
    assert_eq!(again, pointer);
    // Without a contact in the User-Agent nothing is fetched.
    let o = asof(&[
        "poll",
        "--once",
        "--corpus",
        dir,
        "--user-agent",
        "bot",
        "--edgar-base-url",
        &base,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--user-agent"));
}

#[test]
fn the_poll_daemon_publishes_and_stops_on_sigterm() {
    let (_rt, base) = feed();
    let corpus = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_asof"))
        .args([
            "poll",
            "--interval",
            "1",
            "--corpus",
            corpus.path().to_str().unwrap(),
        ])
        .args([
            "--user-agent",
            "asof tests ops@example.com",
            "--edgar-base-url",
            &base,
        ])
        .env("ASOF_LOG", "error")
        .spawn()
        .unwrap();
    // Ready when its first publish has moved the pointer (bounded; never a fixed sleep).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !corpus.path().join("manifests/CURRENT").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no publish within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "{s:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running 20 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A local EDGAR daily-index archive of 2024-01-01..2024-03-31 (40 filings a weekday).
fn archive_feed() -> (tokio::runtime::Runtime, String) {
    use asof_test_support::edgar_archive::{archive, date};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let feed = std::sync::Arc::new(asof_test_support::feed::Feed::default());
    *feed.archives.lock().unwrap() = archive(date("2024-01-01"), date("2024-03-31"), 40, 5)
        .into_iter()
        .collect();
    let base = rt.block_on(asof_test_support::feed::serve(feed));
    (rt, base)
}

fn backfill_cmd(base: &str, corpus: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_asof"));
    c.args(["poll", "--corpus", corpus.to_str().unwrap()])
        .args(["--user-agent", "asof tests ops@example.com"])
        .args(["--edgar-base-url", base])
        .args(["--backfill", "2024-01-01..2024-03-31", "--batch-days", "7"])
        .args(["--commit-time", "2026-11-25T00:00:00Z"])
        .env("ASOF_LOG", "error");
    c
}

/// Versions published into `corpus` so far (manifests written), as the pointer moves.
fn manifests(corpus: &Path) -> usize {
    std::fs::read_dir(corpus.join("manifests"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".json"))
            })
            .count()
        })
        .unwrap_or(0)
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_backfill_killed_or_stopped_mid_way_resumes_to_the_uninterrupted_version() {
    let (_rt, base) = archive_feed();
    let whole = tempfile::tempdir().unwrap();
    let o = backfill_cmd(&base, whole.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let version = stdout(&o).lines().last().unwrap().to_owned();
    assert!(version.starts_with("sha256:"), "{version}");
    assert_eq!(
        manifests(whole.path()),
        13,
        "91 days in batches of 7: one version each"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--commit-time 2026-11-25T00:00:00Z"), "{err}");

    // SIGKILL once a few batches are published, then the same command again.
    let killed = tempfile::tempdir().unwrap();
    let mut child = backfill_cmd(&base, killed.path()).spawn().unwrap();
    wait_for("four publishes", || manifests(killed.path()) >= 4);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(manifests(killed.path()) < 13, "killed before the end");
    let o = backfill_cmd(&base, killed.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o).lines().last(), Some(version.as_str()));

    // SIGTERM: the batch in hand is abandoned, exit status 3, and the resume command said.
    let stopped = tempfile::tempdir().unwrap();
    let child = backfill_cmd(&base, stopped.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("two publishes", || manifests(stopped.path()) >= 2);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if manifests(stopped.path()) < 13 {
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("resume with: asof poll --backfill"), "{err}");
    }
    let o = backfill_cmd(&base, stopped.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o).lines().last(), Some(version.as_str()));
}

/// `asof ingest` of a ticker list (the list state, the identity file, the manifest, the
/// pointer: a ticker list makes no rows) onto `corpus`, stopped for good after write
/// `pause_at` when given. Returns the child (stderr piped).
fn ticker_ingest(corpus: &Path, pause_at: Option<u64>) -> std::process::Child {
    let list = repo().join(
        "snapshots/sources/sec.edgar.ticker_history/company_tickers_weekly_hvcwatch/company_tickers_2026-02-01T0612Z.json",
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_asof"));
    c.args([
        "ingest",
        "--corpus",
        corpus.to_str().unwrap(),
        "--source",
        "sec.edgar",
        "--commit-time",
        "2026-02-02T00:00:00Z",
        "--captured-at",
        "2026-02-01T06:12:00Z",
        list.to_str().unwrap(),
    ])
    .env("ASOF_LOG", "error")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    if let Some(n) = pause_at {
        c.env(asof_engine::store::FAULT_PAUSE_ENV, n.to_string());
    }
    c.spawn().unwrap()
}

/// A corpus holding one day of all of EDGAR: the parent every crash below starts from.
fn daily_index_corpus(dir: &Path) -> String {
    let src = repo().join("snapshots/sources/sec.edgar/daily-index/company.20221003.idx");
    let o = asof(&[
        "ingest",
        "--corpus",
        dir.to_str().unwrap(),
        "--source",
        "sec.edgar",
        "--commit-time",
        "2022-10-04T06:00:00Z",
        src.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stdout(&o).lines().last().unwrap().to_owned()
}

fn pointer(corpus: &Path) -> String {
    std::fs::read_to_string(corpus.join("manifests/CURRENT"))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_publisher_killed_after_any_of_its_writes_leaves_a_verified_corpus_and_the_next_publish_succeeds()
 {
    use std::io::BufRead;
    // The uninterrupted publish, for the version every recovery must reach.
    let whole = tempfile::tempdir().unwrap();
    let parent = daily_index_corpus(whole.path());
    let o = ticker_ingest(whole.path(), None)
        .wait_with_output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let child_version = stdout(&o).lines().last().unwrap().to_owned();
    assert_ne!(child_version, parent);

    let mut n = 1;
    loop {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(daily_index_corpus(dir.path()), parent);
        let mut child = ticker_ingest(dir.path(), Some(n));
        let err = child.stderr.take().unwrap();
        let paused = std::io::BufReader::new(err)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains(asof_engine::store::FAULT_PAUSED));
        let Some(paused) = paused else {
            // The publish needed fewer than `n` writes: every point has been tried.
            assert!(child.wait().unwrap().success());
            break;
        };
        // kill -9 at exactly this point.
        child.kill().unwrap();
        child.wait().unwrap();
        // The Delta commits of the version are written after its pointer.
        let pointer_moved = paused.contains("manifests/CURRENT") || paused.contains("/_delta_log/");
        assert_eq!(
            &pointer(dir.path()),
            if pointer_moved {
                &child_version
            } else {
                &parent
            },
            "after {paused}: the pointer names a whole version, the parent until the last write"
        );
        let v = asof(&["verify", "--corpus", dir.path().to_str().unwrap()]);
        assert!(
            v.status.success(),
            "verify after {paused}: {}{}",
            stdout(&v),
            String::from_utf8_lossy(&v.stderr)
        );
        // The same publish again completes, to the version of the uninterrupted one.
        let again = ticker_ingest(dir.path(), None).wait_with_output().unwrap();
        assert!(
            again.status.success(),
            "re-run after {paused}: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert_eq!(pointer(dir.path()), child_version, "after {paused}");
        // And its Delta log is whole again (an identical re-run writes what a kill left out).
        let v = asof(&["verify", "--corpus", dir.path().to_str().unwrap()]);
        assert!(
            v.status.success() && !stdout(&v).contains("not written yet"),
            "verify after the re-run of {paused}: {}",
            stdout(&v)
        );
        n += 1;
        assert!(n < 100, "a publish of one list takes fewer than 100 writes");
    }
    // At least the list state, the identity file, the manifest and the pointer.
    assert!(n > 4, "the loop covered every write of the publish ({n})");
}

/// A tmpfs of `bytes` mounted at `dir` (unmounted on drop), or `None` where this process may
/// not mount (not root, or no tmpfs): the disk-full test is then skipped with a notice.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }

    fn grow(&self, bytes: u64) {
        let s = Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(s.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn an_ingest_onto_a_full_disk_fails_saying_so_and_leaves_the_corpus_as_it_was() {
    // How much the parent corpus takes, measured on an ordinary directory.
    let probe = tempfile::tempdir().unwrap();
    daily_index_corpus(probe.path());
    let used: u64 = walk(probe.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len().div_ceil(4096) * 4096)
        .sum();
    let dir = tempfile::tempdir().unwrap();
    // Room for the parent and a little more, not for the ticker list's objects.
    let Some(fs) = Tmpfs::mount(dir.path(), used + 256 * 1024) else {
        assert!(
            std::env::var("CI").is_err(),
            "CI runs as root and must be able to mount a tmpfs"
        );
        eprintln!("SKIPPED: cannot mount a tmpfs here (not root?)");
        return;
    };
    let parent = daily_index_corpus(dir.path());
    let o = ticker_ingest(dir.path(), None).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is full: nothing was published") && err.contains(&parent),
        "{err}"
    );
    assert_eq!(pointer(dir.path()), parent);
    let v = asof(&["verify", "--corpus", dir.path().to_str().unwrap()]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    // With room again, the same command publishes.
    fs.grow(used * 4 + 8 * 1024 * 1024);
    let o = ticker_ingest(dir.path(), None).wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_ne!(pointer(dir.path()), parent);
}

/// Every variable of `asof serve` and `asof keys create` that carries a secret: the state
/// store's and the mail server's URLs, the billing processor's key and webhook secret, both
/// sign-in providers' client secrets. (`cli::serve::tests` checks that no other flag of
/// `serve` carries one: each flag named like a secret hides its value.)
const SECRET_VARIABLES: &[(&str, &str)] = &[
    (
        "ASOF_DATABASE_URL",
        "postgres://asof:db-secret-1@db.internal/asof",
    ),
    (
        "ASOF_SMTP_URL",
        "smtp://mailer:smtp-secret-2@mail.internal:587",
    ),
    ("ASOF_BILLING_SECRET_KEY", "sk_live_billing-secret-3"),
    ("ASOF_BILLING_WEBHOOK_SECRET", "whsec_webhook-secret-4"),
    ("ASOF_PROVIDER_A_CLIENT_SECRET", "provider-a-secret-5"),
    ("ASOF_PROVIDER_B_CLIENT_SECRET", "provider-b-secret-6"),
];

/// `--help` never prints the value of a variable that carries a secret, whatever subcommand
/// shows it.
#[test]
fn help_never_prints_a_secret_a_deployment_sets() {
    for args in [&["serve", "--help"][..], &["keys", "create", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_asof"))
            .args(args)
            .envs(SECRET_VARIABLES.iter().copied())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("ASOF_DATABASE_URL"), "{args:?}: {text}");
        if args[0] == "serve" {
            for (name, _) in SECRET_VARIABLES {
                assert!(text.contains(name), "serve --help names {name}: {text}");
            }
        }
        for part in ["db.internal", "mail.internal"] {
            assert!(!text.contains(part), "{args:?} printed {part}: {text}");
        }
        // Each value holds `secret-N`, N its place in the list.
        for n in 1..=SECRET_VARIABLES.len() {
            assert!(
                !text.contains(&format!("secret-{n}")),
                "{args:?} printed secret {n}: {text}"
            );
        }
    }
}

/// The shipped replica settings (`deploy/systemd/asof.env`) are safe as they stand: forwarded
/// headers believed only from named proxy addresses (each one `--trusted-proxy` takes), never
/// the old count-based trust, and a replica listening on a private address rather than every
/// interface.
#[test]
fn the_shipped_replica_settings_trust_forwarded_headers_only_from_named_proxies() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd/asof.env"),
    )
    .unwrap();
    let settings: std::collections::BTreeMap<&str, &str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once('=').expect("NAME=value"))
        .collect();
    assert!(!settings.contains_key("ASOF_TRUST_FORWARDED_FOR"), "{text}");
    let proxies = settings["ASOF_TRUSTED_PROXIES"];
    for p in proxies.split(',') {
        asof_server::http::client::parse_proxy(p).unwrap_or_else(|e| panic!("{e}"));
    }
    let listen: std::net::SocketAddr = settings["ASOF_LISTEN"].parse().unwrap();
    assert!(
        !listen.ip().is_unspecified(),
        "listens on every interface: {listen}"
    );
}

/// The old count-based trust is refused at start, naming its replacement, so a configuration
/// written for it cannot silently change whom the limits count.
#[test]
fn the_old_forwarded_for_settings_are_refused_naming_trusted_proxy() {
    for (args, env) in [
        (&["--trust-forwarded-for"][..], None),
        (&[][..], Some(("ASOF_TRUSTED_PROXIES", "1"))),
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_asof"));
        c.args(["serve", "--listen", "127.0.0.1:0"]).args(args);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success(), "{args:?} {env:?} started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--trusted-proxy") || err.contains("not by count"),
            "{args:?} {env:?}: {err}"
        );
    }
}
