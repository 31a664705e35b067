//! A generational slab: the stack's "file descriptor table".
//!
//! Values live in fixed-size chunks, so growing never moves existing entries
//! and memory grows in proportion to use (no doubling slack). A [`Key`] is an
//! index plus the generation of the slot when it was handed out; removing a
//! value bumps the slot's generation, so a stale key can never reach the value
//! that later reuses its slot.
//!
//! Freed slots are reused most recently freed first: that slot's memory is the
//! likeliest to still be in cache. A slot whose generation would wrap is
//! retired instead of reused, so even a key kept for 2^32 reuses stays stale.
//!
//! Generations start at 1, so `Key::default()` (index 0, generation 0) is a
//! null key that never resolves.
//!
//! A slab made [`with_recycling(false)`](Slab::with_recycling) keeps each
//! value in a box of its own, allocated on insert and freed on remove: the
//! ablation's baseline, a conventional stack that allocates a socket's state
//! per connection. Slot indices and generations work the same either way.

use core::fmt;

/// Slots per chunk. A power of two so locating a slot is a shift and a mask.
const CHUNK_SLOTS: usize = 1024;
/// The end of the free list. Also caps the slab at `u32::MAX` slots.
const NONE: u32 = u32::MAX;
/// The generation of a slot's first value. Not 0, which `Key::default()` has.
const FIRST_GENERATION: u32 = 1;

/// A handle to a value in a [`Slab`].
///
/// The default key is never issued, so it never resolves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    index: u32,
    generation: u32,
}

impl Key {
    /// The slot index (dense, starting at 0).
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The slot's generation when this key was issued.
    pub const fn generation(self) -> u32 {
        self.generation
    }
}

/// One slot: the generation it is at, and its value or free-list link.
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    entry: Entry<T>,
}

#[derive(Debug)]
enum Entry<T> {
    Occupied(T),
    /// Occupied, the value on an allocation of its own (a slab that does
    /// not recycle its values' storage).
    Boxed(Box<T>),
    /// Free; `next_free` links the free list ([`NONE`] at its end, and for
    /// retired slots, which are on no list).
    Vacant {
        next_free: u32,
    },
}

/// A chunked, generational slab.
pub struct Slab<T> {
    chunks: Vec<Box<[Slot<T>]>>,
    /// The most recently freed slot, or [`NONE`].
    free_head: u32,
    /// Slots handed out at least once; slots at or past it are untouched.
    used_slots: u32,
    len: usize,
    /// Values live in their slots (true), or each in a box of its own.
    recycle: bool,
}

impl<T> Slab<T> {
    /// An empty slab; nothing is allocated until the first insert.
    #[must_use]
    pub fn new() -> Slab<T> {
        Slab::with_recycling(true)
    }

    /// An empty slab whose values live in its slots (`recycle`, as
    /// [`Slab::new`]), or each in a box allocated on insert and freed on
    /// remove.
    #[must_use]
    pub fn with_recycling(recycle: bool) -> Slab<T> {
        Slab { chunks: Vec::new(), free_head: NONE, used_slots: 0, len: 0, recycle }
    }

    /// Stores `value` and returns its key. Reuses the most recently freed slot.
    ///
    /// # Panics
    ///
    /// When `u32::MAX` slots are in use or retired.
    pub fn insert(&mut self, value: T) -> Key {
        let entry = if self.recycle { Entry::Occupied(value) } else { Entry::Boxed(Box::new(value)) };
        let index = if self.free_head != NONE {
            let index = self.free_head;
            let slot = self.slot_mut(index);
            let Entry::Vacant { next_free } = slot.entry else {
                unreachable!("free list reaches occupied slot {index}");
            };
            slot.entry = entry;
            self.free_head = next_free;
            index
        } else {
            let index = self.used_slots;
            assert!(index != NONE, "slab is full");
            if index as usize / CHUNK_SLOTS == self.chunks.len() {
                self.chunks.push(new_chunk());
            }
            self.used_slots += 1;
            self.slot_mut(index).entry = entry;
            index
        };
        self.len += 1;
        Key { index, generation: self.slot_mut(index).generation }
    }

    /// Removes and returns the value behind `key`, if `key` is still live.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let free_head = self.free_head;
        let slot = self.live_slot_mut(key)?;
        let retire = slot.generation == u32::MAX;
        let next_free = if retire { NONE } else { free_head };
        let value = match core::mem::replace(&mut slot.entry, Entry::Vacant { next_free }) {
            Entry::Occupied(value) => value,
            Entry::Boxed(value) => *value,
            Entry::Vacant { .. } => unreachable!("live_slot_mut returns occupied slots"),
        };
        if !retire {
            // Bumping the generation is what makes every outstanding key to
            // this slot stale. A retired slot stays at u32::MAX and vacant, so
            // no key reaches it again.
            slot.generation += 1;
            self.free_head = key.index;
        }
        self.len -= 1;
        Some(value)
    }

    /// The value behind `key`, if `key` is still live.
    #[must_use]
    pub fn get(&self, key: Key) -> Option<&T> {
        match self.slot(key.index)? {
            Slot { generation, entry: Entry::Occupied(value) } if *generation == key.generation => Some(value),
            Slot { generation, entry: Entry::Boxed(value) } if *generation == key.generation => Some(value),
            _ => None,
        }
    }

    /// The value behind `key`, if `key` is still live.
    #[must_use]
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.live_slot_mut(key)? {
            Slot { entry: Entry::Occupied(value), .. } => Some(value),
            Slot { entry: Entry::Boxed(value), .. } => Some(value),
            Slot { entry: Entry::Vacant { .. }, .. } => None,
        }
    }

    /// The live key at `index`, if the slot is occupied.
    #[must_use]
    pub fn key_at(&self, index: u32) -> Option<Key> {
        match self.slot(index)? {
            Slot { generation, entry: Entry::Occupied(_) | Entry::Boxed(_) } => {
                Some(Key { index, generation: *generation })
            }
            Slot { entry: Entry::Vacant { .. }, .. } => None,
        }
    }

    /// Whether `key` is still live.
    #[must_use]
    pub fn contains(&self, key: Key) -> bool {
        self.get(key).is_some()
    }

    /// The number of live values.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No live values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of heap this slab holds (chunks and bookkeeping).
    ///
    /// Heap owned by the values themselves is not counted.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.chunks.len() * CHUNK_SLOTS * size_of::<Slot<T>>() + self.chunks.capacity() * size_of::<Box<[Slot<T>]>>()
    }

    /// Live values with their keys, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter()).take(self.used_slots as usize).zip(0..).filter_map(
            |(slot, index)| match &slot.entry {
                Entry::Occupied(value) => Some((Key { index, generation: slot.generation }, value)),
                Entry::Boxed(value) => Some((Key { index, generation: slot.generation }, &**value)),
                Entry::Vacant { .. } => None,
            },
        )
    }

    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let (chunk, offset) = split(index);
        self.chunks.get(chunk)?.get(offset)
    }

    fn slot_mut(&mut self, index: u32) -> &mut Slot<T> {
        let (chunk, offset) = split(index);
        &mut self.chunks[chunk][offset]
    }

    /// The occupied slot `key` refers to, if the key is live.
    fn live_slot_mut(&mut self, key: Key) -> Option<&mut Slot<T>> {
        let (chunk, offset) = split(key.index);
        let slot = self.chunks.get_mut(chunk)?.get_mut(offset)?;
        (slot.generation == key.generation && matches!(slot.entry, Entry::Occupied(_) | Entry::Boxed(_)))
            .then_some(slot)
    }
}

/// Chunk number and offset within the chunk of a slot index.
fn split(index: u32) -> (usize, usize) {
    (index as usize / CHUNK_SLOTS, index as usize % CHUNK_SLOTS)
}

fn new_chunk<T>() -> Box<[Slot<T>]> {
    // Collecting an exact-size iterator allocates exactly one chunk.
    (0..CHUNK_SLOTS).map(|_| Slot { generation: FIRST_GENERATION, entry: Entry::Vacant { next_free: NONE } }).collect()
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab::new()
    }
}

/// A summary: a connection table can hold millions of values.
impl<T> fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slab")
            .field("len", &self.len)
            .field("used_slots", &self.used_slots)
            .field("chunks", &self.chunks.len())
            .field("recycle", &self.recycle)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn insert_get_remove() {
        let mut slab = Slab::new();
        assert_eq!(slab.heap_bytes(), 0, "nothing allocated before the first insert");
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_eq!((a.index(), b.index()), (0, 1));
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.get(a), Some(&"a"));
        *slab.get_mut(b).unwrap() = "B";
        assert_eq!(slab.get(b), Some(&"B"));
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.get_mut(a), None);
        assert!(!slab.contains(a));
        assert_eq!(slab.len(), 1);
        assert_eq!(slab.key_at(0), None);
        assert_eq!(slab.key_at(1), Some(b));
        assert_eq!(slab.key_at(2), None);
        assert_eq!(slab.key_at(u32::MAX), None);
    }

    #[test]
    fn reuses_most_recently_freed_slot_with_new_generation() {
        let mut slab = Slab::new();
        let keys: Vec<Key> = (0..5).map(|i| slab.insert(i)).collect();
        slab.remove(keys[1]);
        slab.remove(keys[3]);
        let c = slab.insert(30);
        assert_eq!(c.index(), 3, "LIFO reuse");
        assert_eq!(c.generation(), keys[3].generation() + 1);
        assert_eq!(slab.get(keys[3]), None, "stale key after reuse");
        assert_eq!(slab.get(c), Some(&30));
        assert_eq!(slab.insert(10).index(), 1);
        assert_eq!(slab.insert(5).index(), 5);
    }

    #[test]
    fn growth_never_moves_values_and_memory_is_per_chunk() {
        let mut slab = Slab::new();
        let first = slab.insert(0u64);
        let address = slab.get(first).unwrap() as *const u64;
        for i in 1..(3 * CHUNK_SLOTS as u64 + 1) {
            slab.insert(i);
        }
        assert_eq!(slab.get(first).unwrap() as *const u64, address);
        assert_eq!(slab.chunks.len(), 4);
        let chunk_bytes = CHUNK_SLOTS * size_of::<Slot<u64>>();
        assert!(slab.heap_bytes() >= 4 * chunk_bytes);
        assert!(slab.heap_bytes() < 5 * chunk_bytes);
    }

    #[test]
    fn retires_a_slot_whose_generation_would_wrap() {
        let mut slab = Slab::new();
        let a = slab.insert('a');
        slab.slot_mut(a.index()).generation = u32::MAX;
        let a = slab.key_at(a.index()).unwrap();
        assert_eq!(a.generation(), u32::MAX);
        assert_eq!(slab.remove(a), Some('a'));
        assert_eq!(slab.get(a), None);
        let b = slab.insert('b');
        assert_ne!(b.index(), a.index(), "retired slot is never reused");
        assert_eq!(slab.key_at(a.index()), None);
        // A key from before the wrap point does not resolve either.
        assert_eq!(slab.get(Key { index: a.index(), generation: FIRST_GENERATION }), None);
    }

    #[test]
    fn default_key_never_resolves() {
        let mut slab = Slab::new();
        let first = slab.insert(1);
        assert_eq!(first.index(), Key::default().index());
        assert_ne!(first, Key::default());
        assert_eq!(slab.get(Key::default()), None);
        assert_eq!(slab.remove(Key::default()), None);
        assert_eq!(slab.get(first), Some(&1));
    }

    #[test]
    fn iter_visits_live_values_in_index_order() {
        let mut slab = Slab::new();
        let keys: Vec<Key> = (0..2_000).map(|i| slab.insert(i)).collect();
        for key in keys.iter().step_by(3) {
            slab.remove(*key);
        }
        let live: Vec<(Key, i32)> = slab.iter().map(|(k, v)| (k, *v)).collect();
        let expected: Vec<(Key, i32)> =
            keys.iter().zip(0..).filter(|&(_, i)| i % 3 != 0).map(|(k, i)| (*k, i)).collect();
        assert_eq!(live, expected);
    }

    #[test]
    fn drops_values() {
        use std::rc::Rc;
        let value = Rc::new(());
        let mut slab = Slab::new();
        let key = slab.insert(Rc::clone(&value));
        slab.insert(Rc::clone(&value));
        assert_eq!(Rc::strong_count(&value), 3);
        drop(slab.remove(key));
        assert_eq!(Rc::strong_count(&value), 2);
        drop(slab);
        assert_eq!(Rc::strong_count(&value), 1);
    }

    #[test]
    fn without_recycling_each_value_has_an_allocation_of_its_own() {
        let mut slab = Slab::with_recycling(false);
        let a = slab.insert([1u64; 64]);
        // The value is not in the slot: a box the slot points to.
        assert!(matches!(slab.slot(a.index()).unwrap().entry, Entry::Boxed(_)));
        assert_eq!(slab.remove(a), Some([1u64; 64]));
        let b = slab.insert([2u64; 64]);
        assert_eq!(b.index(), a.index(), "slot indices are reused as before");
        assert_eq!(slab.get(a), None, "and the old key is stale");
        assert_eq!(slab.get(b).map(|v| v[0]), Some(2));
        *slab.get_mut(b).unwrap() = [3u64; 64];
        assert_eq!(slab.iter().map(|(k, v)| (k, v[0])).collect::<Vec<_>>(), [(b, 3)]);
        assert_eq!(slab.key_at(b.index()), Some(b));
        let recycled = {
            let mut slab = Slab::new();
            let k = slab.insert(0u8);
            matches!(slab.slot(k.index()).unwrap().entry, Entry::Occupied(_))
        };
        assert!(recycled, "a recycling slab keeps values in their slots");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32),
        /// Remove the key at this position among every key ever issued.
        Remove(proptest::sample::Index),
        Get(proptest::sample::Index),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u32>().prop_map(Op::Insert),
            2 => any::<proptest::sample::Index>().prop_map(Op::Remove),
            1 => any::<proptest::sample::Index>().prop_map(Op::Get),
        ]
    }

    proptest! {
        #[test]
        fn matches_hashmap_model(ops in proptest::collection::vec(op(), 1..3_000), recycle in any::<bool>()) {
            let mut slab = Slab::with_recycling(recycle);
            let mut live: HashMap<Key, u32> = HashMap::new();
            let mut issued: Vec<Key> = Vec::new();
            let mut issued_set: HashSet<Key> = HashSet::new();
            let mut fresh_slots = 0;
            let mut freed: Vec<u32> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(value) => {
                        let key = slab.insert(value);
                        prop_assert!(issued_set.insert(key), "key {:?} issued twice", key);
                        match freed.pop() {
                            Some(index) => prop_assert_eq!(key.index(), index, "LIFO reuse"),
                            None => {
                                prop_assert_eq!(key.index(), fresh_slots);
                                fresh_slots += 1;
                            }
                        }
                        live.insert(key, value);
                        issued.push(key);
                    }
                    Op::Remove(which) if !issued.is_empty() => {
                        let key = *which.get(&issued);
                        let removed = slab.remove(key);
                        prop_assert_eq!(removed, live.remove(&key));
                        if removed.is_some() {
                            freed.push(key.index());
                        }
                    }
                    Op::Get(which) if !issued.is_empty() => {
                        let key = *which.get(&issued);
                        prop_assert_eq!(slab.get(key), live.get(&key));
                    }
                    Op::Remove(_) | Op::Get(_) => {}
                }
                prop_assert_eq!(slab.len(), live.len());
            }
            // Every issued key resolves exactly when the model holds it.
            for key in &issued {
                prop_assert_eq!(slab.get(*key), live.get(key));
                if live.contains_key(key) {
                    prop_assert_eq!(slab.key_at(key.index()), Some(*key));
                }
            }
            prop_assert_eq!(slab.iter().count(), live.len());
            for (key, value) in slab.iter() {
                prop_assert_eq!(live.get(&key), Some(value));
            }
        }
    }
}
