//! Per-client weights for the fairness policy (`--weight`, the file's
//! `[weight]` table): which clients, by address or prefix (IPv4 or IPv6), get which
//! share of the capacity, and the lookup the backends make when a flow is
//! put under control.
//!
//! `equal-rate` gives each flow `capacity × weight / Σ weights`; the
//! shards divide a configured `--capacity` by their flows' weights too.
//! The longest matching prefix decides a client's weight; a client no
//! prefix matches has weight 1.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::de::{Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

use super::{AnyPrefix, Ip6Prefix, IpPrefix};

/// A flow's weight in the policy's shares: from [`Weight::MIN`] to
/// [`Weight::MAX`], 1 by default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weight(f64);

// Never NaN: every constructor checks the range.
impl Eq for Weight {}

impl Weight {
    /// The lightest weight. The shards publish their weights in
    /// thousandths ([`ShareBoard`](crate::backend::fairness::ShareBoard)),
    /// so a lighter one would count as none.
    pub const MIN: f64 = 0.001;
    /// The heaviest weight: a million to one is already beyond meaning,
    /// and the shards' sums stay far from overflowing.
    pub const MAX: f64 = 1000.0;

    /// `w`, if it is a number from [`MIN`](Self::MIN) to [`MAX`](Self::MAX).
    #[must_use]
    pub fn new(w: f64) -> Option<Weight> {
        (Self::MIN..=Self::MAX).contains(&w).then_some(Weight(w))
    }

    /// The weight as the policy takes it.
    #[must_use]
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Weight {
        Weight(1.0)
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The weight of the clients in one prefix: `10.77.0.12=2` (a bare
/// address is a /32, or a /128 for IPv6), `10.77.0.0/24=0.5`,
/// `fd77::/64=2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientWeight {
    clients: AnyPrefix,
    weight: Weight,
}

impl ClientWeight {
    /// `weight` for the clients `clients` names (`10.77.0.12`,
    /// `10.77.0.0/24`, `fd77::/64`).
    ///
    /// # Errors
    ///
    /// A one-line reason: the address or prefix does not parse, or the
    /// weight is out of range.
    pub fn new(clients: &str, weight: f64) -> Result<ClientWeight, String> {
        let clients = clients.trim();
        let prefix = if clients.contains('/') {
            clients.parse::<AnyPrefix>()?
        } else {
            match clients.parse() {
                Ok(std::net::IpAddr::V4(addr)) => AnyPrefix::V4(IpPrefix { addr, prefix: 32 }),
                Ok(std::net::IpAddr::V6(addr)) => AnyPrefix::V6(Ip6Prefix { addr, prefix: 128 }),
                Err(_) => {
                    return Err(format!("'{clients}' is not an IPv4 address or ADDR/PREFIX, nor an IPv6 address"));
                }
            }
        };
        let weight = Weight::new(weight).ok_or_else(|| {
            format!("weight {weight} for {clients} is out of range: from {} to {}", Weight::MIN, Weight::MAX)
        })?;
        // The network, not the address it was written with: 10.0.0.7/24
        // and 10.0.0.0/24 are the same clients.
        Ok(ClientWeight { clients: prefix.network(), weight })
    }

    /// The clients: a network (its host bits clear) and its prefix length.
    #[must_use]
    pub fn clients(&self) -> AnyPrefix {
        self.clients
    }

    /// Their weight.
    #[must_use]
    pub fn weight(&self) -> Weight {
        self.weight
    }
}

/// `ADDR[/PREFIX]=WEIGHT`, as `--weight` takes it.
impl FromStr for ClientWeight {
    type Err = String;
    fn from_str(s: &str) -> Result<ClientWeight, String> {
        let (clients, weight) =
            s.split_once('=').ok_or_else(|| format!("'{s}' is not ADDR[/PREFIX]=WEIGHT (e.g. 10.77.0.0/24=0.5)"))?;
        let weight = weight.trim();
        let weight = weight.parse::<f64>().map_err(|_| format!("weight '{weight}' in '{s}' is not a number"))?;
        ClientWeight::new(clients, weight)
    }
}

impl fmt::Display for ClientWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.clients, self.weight)
    }
}

/// Every client's weight: the configured prefixes, longest first, looked
/// up in order, so the first match is the longest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientWeights {
    /// Longest prefix first; no two for the same network.
    by_prefix: Vec<ClientWeight>,
}

impl ClientWeights {
    /// The table of `weights`.
    ///
    /// # Errors
    ///
    /// Two weights for the same network, named.
    pub fn new(mut weights: Vec<ClientWeight>) -> Result<ClientWeights, String> {
        // Two weights for one network end up side by side.
        weights.sort_by(|a, b| {
            b.clients.prefix_len().cmp(&a.clients.prefix_len()).then(a.clients.addr().cmp(&b.clients.addr()))
        });
        if let Some(pair) = weights.windows(2).find(|p| p[0].clients == p[1].clients) {
            return Err(format!(
                "--weight {} is given twice ({} and {})",
                pair[0].clients, pair[0].weight, pair[1].weight
            ));
        }
        Ok(ClientWeights { by_prefix: weights })
    }

    /// The weight of a flow from `peer`: the longest matching prefix's,
    /// else 1. An IPv4-mapped IPv6 peer (a dual-stack listener's IPv4
    /// client) counts by its IPv4 address.
    #[must_use]
    pub fn weight_of(&self, peer: IpAddr) -> Weight {
        self.by_prefix.iter().find(|w| w.clients.contains(peer)).map_or_else(Weight::default, |w| w.weight)
    }

    /// Whether every client has weight 1.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_prefix.is_empty()
    }

    /// The configured weights, longest prefix first.
    pub fn iter(&self) -> impl Iterator<Item = &ClientWeight> + '_ {
        self.by_prefix.iter()
    }
}

/// The file's `weight`: a table of clients and weights
/// (`"10.77.0.0/24" = 0.5`), or a list of what `--weight` takes
/// (`["10.77.0.0/24=0.5"]`).
pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ClientWeight>, D::Error> {
    struct TableOrList;

    impl<'de> Visitor<'de> for TableOrList {
        type Value = Vec<ClientWeight>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of clients and weights (\"10.77.0.0/24\" = 0.5) or a list of \"ADDR[/PREFIX]=WEIGHT\"")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<ClientWeight>, A::Error> {
            let mut weights = Vec::new();
            while let Some((clients, weight)) = map.next_entry::<String, f64>()? {
                weights.push(ClientWeight::new(&clients, weight).map_err(A::Error::custom)?);
            }
            Ok(weights)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<ClientWeight>, A::Error> {
            let mut weights = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                weights.push(text.parse().map_err(A::Error::custom)?);
            }
            Ok(weights)
        }
    }

    d.deserialize_any(TableOrList)
}
