//! The known TCP resource attacks against the server on the simulated
//! network (see `fairway_tests::attacks`): for each, the legitimate
//! downloads keep ≥ 90 % of their goodput, the server's heap stays under
//! the bound its configuration implies, the attacker's own transfers
//! complete intact once it behaves, and no connection is left behind; plus
//! what each attack specifically must not achieve.
//!
//! The tests run one at a time (a lock), so that no other test's
//! allocations are counted against the server's heap.

use std::sync::{Mutex, OnceLock};

use fairway_stack::DropReason;
use fairway_tests::attacks::{Attack, AttackParams, AttackResult, attack, judge_against};
use fairway_tests::scenario;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const SEED: u64 = 1;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The honest run, once.
fn reference() -> &'static AttackResult {
    static REFERENCE: OnceLock<AttackResult> = OnceLock::new();
    REFERENCE.get_or_init(|| attack(SEED, &AttackParams::issue(Attack::Honest), scenario::read_net_heap_bytes))
}

/// Runs `kind`, prints its report and checks the common criteria. The
/// caller holds [`ONE_AT_A_TIME`] for its whole test (a failing assertion's
/// backtrace allocates too).
fn run(kind: Attack) -> AttackResult {
    let reference = reference();
    assert!(reference.peak_heap > 0, "the counting allocator is not installed");
    assert_eq!(reference.intact.0, reference.intact.1, "{}", reference.lines.join("\n"));
    let under = attack(SEED, &AttackParams::issue(kind), scenario::read_net_heap_bytes);
    let report = judge_against(reference, &under);
    let text = report.lines.join("\n");
    println!("{text}");
    assert!(report.ok, "{text}");
    under
}

#[test]
fn segment_smack_one_byte_segments_across_the_window() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::SegmentSmack);
    assert!(r.attacker.forged > 50_000, "the flood was sent: {}", r.attacker.forged);
}

#[test]
fn sack_panic_misaligned_sack_blocks_at_the_smallest_mss() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    run(Attack::SackPanic);
}

#[test]
fn sack_reneging_sacked_data_discarded_is_retransmitted() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::SackReneging);
    assert!(r.server_reneging > 0, "the server noticed the reneging");
}

#[test]
fn a_zero_window_after_the_request_is_probed_with_backoff() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::ZeroWindow);
    // 2 s of zero window: persist probes back off from the RTO, so each
    // connection sees a handful, never a stream of data.
    assert!(r.attacker.data_during_attack < 200, "{} data segments into a zero window", r.attacker.data_during_attack);
}

#[test]
fn ack_division_does_not_inflate_the_window() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    run(Attack::AckDivision);
}

#[test]
fn optimistic_acks_for_unsent_data_are_dropped() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::OptimisticAck);
    assert!(r.dropped(DropReason::TcpAckUnsent) > 0, "ACKs above SND.NXT counted");
}

#[test]
fn a_one_byte_window_gets_one_byte_segments_at_the_ack_rate() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::TinyWindow);
    assert!(
        r.attacker.received_during_attack <= 2 * r.attacker.sent + 100,
        "the server sent {} frames into a one-byte window for {} from the attacker",
        r.attacker.received_during_attack,
        r.attacker.sent
    );
}

#[test]
fn a_dup_ack_flood_neither_amplifies_nor_stalls() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::DupAckFlood);
    assert!(r.attacker.forged > 10_000);
}

#[test]
fn rst_fin_syn_storms_get_rate_limited_challenge_acks_and_no_resets() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::RstFinStorm);
    assert!(r.attacker.forged > 50_000);
    assert!(r.dropped(DropReason::TcpChallengeAckLimit) > 0, "challenge ACKs were rate-limited");
    assert!(r.dropped(DropReason::TcpNoConnection) > 10_000, "RSTs to closed ports arrived");
    assert_eq!(r.server_resets_sent, 0, "an RST is never answered with one");
}

#[test]
fn timestamps_across_the_wrap_with_old_duplicates() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(Attack::PawsWrap);
    assert!(r.dropped(DropReason::TcpPaws) > 0, "old duplicates dropped by PAWS");
}
