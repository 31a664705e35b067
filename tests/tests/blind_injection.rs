//! Blind RSTs and data segments with random sequence numbers neither reset
//! nor corrupt long transfers (RFC 5961).

use fairway_tests::blind_injection::{BlindParams, blind_injection};

/// Issue 3: an attacker that knows the 4-tuples but not the sequence
/// numbers sends 3,000 RSTs and 3,000 data segments (random sequence and
/// acknowledgment numbers, valid checksums) into 4 long transfers. No
/// connection fails, every transfer arrives SHA-256 intact, and every
/// forged segment is counted as a drop (out of window, RST not exact, ACK
/// too old or unsent, challenge ACK over its limit).
#[test]
fn blind_resets_and_data_neither_reset_nor_corrupt_transfers() {
    let p = BlindParams::issue();
    let r = blind_injection(1, &p);
    let text = r.lines.join("\n");
    println!("{text}");
    assert_eq!(r.forged, p.rsts + p.data, "forged segments sent\n{text}");
    assert_eq!(r.finished_before_attack_ended, 0, "the attack must hit every transfer in flight\n{text}");
    assert_eq!(r.connection_errors, 0, "connections failed (Event::Error)\n{text}");
    assert_eq!(r.intact, p.transfers, "transfers intact\n{text}");
    assert!(r.drops >= r.forged as u64, "{} forged segments but only {} drops counted\n{text}", r.forged, r.drops);
    assert!(r.ok());
}

#[test]
fn the_same_seed_gives_the_same_attack_and_outcome() {
    let p = BlindParams {
        size: 2_000_000,
        rsts: 300,
        data: 300,
        attack_duration: fairway_stack::time::Duration::from_millis(100),
        ..BlindParams::issue()
    };
    let a = blind_injection(5, &p);
    let b = blind_injection(5, &p);
    assert!(a.ok(), "{}", a.lines.join("\n"));
    assert_eq!(a.lines, b.lines);
}
