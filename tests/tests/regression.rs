//! The regression table against its snapshot, and the acceptance checks
//! that read its cells.
//!
//! Every test takes its cells from one cache, so each cell runs once per
//! test binary however many tests read it, and tests running in parallel
//! compute different cells at the same time.
//!
//! `FAIRWAY_UPDATE_SNAPSHOTS=1 cargo test -p fairway-tests --test regression`
//! rewrites `tests/snapshots/regression.txt` from this run instead of
//! comparing with it.

use std::path::PathBuf;
use std::sync::{LazyLock, OnceLock};

use fairway_tests::regression::{self, Cell, CellResult, SNAPSHOT_SEED, cells, long_fat_pipe};

static CACHE: LazyLock<Vec<(Cell, OnceLock<CellResult>)>> =
    LazyLock::new(|| cells().into_iter().map(|c| (c, OnceLock::new())).collect());

/// The result of `cell`, run once per test binary.
fn result(cell: &Cell) -> &'static CellResult {
    let (cell, slot) =
        CACHE.iter().find(|(c, _)| c == cell).unwrap_or_else(|| panic!("{} is not a cell of the table", cell.name));
    slot.get_or_init(|| run(cell))
}

fn run(cell: &Cell) -> CellResult {
    let started = std::time::Instant::now();
    let r = regression::run_cell(SNAPSHOT_SEED, cell);
    eprintln!("cell {} ran in {:.1} s", cell.name, started.elapsed().as_secs_f64());
    r
}

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("snapshots").join("regression.txt")
}

#[test]
fn the_regression_table_matches_its_snapshot() {
    let results: Vec<CellResult> = cells().iter().map(|c| result(c).clone()).collect();
    let report = regression::table(SNAPSHOT_SEED, &results);
    let actual = report.lines.join("\n") + "\n";
    println!("{actual}");
    let path = snapshot_path();
    if std::env::var_os("FAIRWAY_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("FAIRWAY_UPDATE_SNAPSHOTS=1: wrote {}", path.display());
    } else {
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}\n(create it with FAIRWAY_UPDATE_SNAPSHOTS=1)", path.display()));
        if let Some(diff) = regression::diff_lines(&expected, &actual) {
            panic!(
                "the regression table differs from {} (- snapshot, + this run):\n{diff}\n\
                 If the change is intended, rewrite the snapshot with\n  \
                 FAIRWAY_UPDATE_SNAPSHOTS=1 cargo test -p fairway-tests --test regression\n\
                 and commit it with the change.",
                path.display()
            );
        }
    }
    assert!(report.ok, "a stream failed its integrity check:\n{actual}");
}

/// Issue 3: one flow on a 1 Gbit/s × 100 ms path with 16 MiB buffers
/// reaches at least 90 % of the link (this needs window scaling).
#[test]
fn one_flow_fills_90_percent_of_a_1_gbit_100_ms_path() {
    let r = result(&long_fat_pipe());
    println!("{}", regression::table_row(r));
    assert!(r.intact(), "{}", regression::table_row(r));
    assert!(
        r.link_percent() >= 90.0,
        "1 Gbit/s x 100 ms: {:.2} Mbit/s is {:.1} % of the link, below 90 % (server at the end: srtt {:?}, cwnd {:?}, \
         peer window {:?}, window scaling {:?})",
        r.goodput_mbps(),
        r.link_percent(),
        r.stream.server_flow.and_then(|f| f.srtt),
        r.stream.server_flow.map(|f| f.cwnd),
        r.stream.server_flow.map(|f| f.snd_wnd),
        r.stream.server_flow.and_then(|f| f.window_scaling),
    );
}

/// Issue 3: with a quarter of the data frames delayed by up to one RTT,
/// the congestion window does not collapse: no retransmission timeout, and
/// at least half the goodput of the same path without reordering. Checked
/// at 10 ms and 50 ms; the ratio only means something when the baseline
/// itself is healthy, so its share of the link is printed too.
#[test]
fn heavy_reordering_causes_no_timeout_and_keeps_half_the_goodput() {
    let mut failed = Vec::new();
    for (reordered, baseline) in regression::reordering_pairs() {
        let (reordered, baseline) = (result(&reordered), result(&baseline));
        println!("{}", regression::table_row(baseline));
        println!("{}", regression::table_row(reordered));
        let r = regression::compare_reordering(reordered, baseline);
        println!(
            "{}; the baseline reaches {:.1} % of the link; {} frames reordered",
            r.describe(),
            baseline.link_percent(),
            reordered.reordered
        );
        assert!(baseline.intact() && reordered.intact(), "a stream failed");
        if !r.met() {
            failed.push(r.describe());
        }
    }
    assert!(failed.is_empty(), "below target (no RTO, at least 50 % of the goodput):\n{}", failed.join("\n"));
}

/// Issue 3's performance target: over the lossy cells of the grid, goodput
/// at least the Mathis et al. bound for Reno on average (each cell the mean
/// of `LOSSY_SEEDS` runs; the first is the table's).
#[test]
fn the_lossy_cells_reach_the_mathis_bound_on_average() {
    let (table_runs, more): (Vec<_>, Vec<_>) =
        regression::lossy_jobs(SNAPSHOT_SEED).into_iter().partition(|&(seed, _)| seed == SNAPSHOT_SEED);
    let mut results: Vec<CellResult> = table_runs.iter().map(|(_, c)| result(c).clone()).collect();
    results.extend(regression::run_jobs(&more, regression::default_threads()));
    let report = regression::lossy_table(SNAPSHOT_SEED, &results);
    let text = report.lines.join("\n");
    println!("{text}");
    assert!(results.iter().all(CellResult::intact), "a stream failed:\n{text}");
    let mean = regression::parse_lossy_verdict(report.last_line()).expect("the verdict line");
    assert!(mean >= 100.0, "{}", report.last_line());
}
