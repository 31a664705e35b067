//! Integration tests and simulated-network scenarios (to come).
