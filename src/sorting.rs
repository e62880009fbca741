//! Sorting off the per-call path, with one copy of the sort in the module.
//!
//! Each `sort_by` of another element type or closure compiles a stable
//! sort of its own, 4-6 KB of code: putting twenty of them, for lists of
//! a few names each, through this one took 87 KB off the stripped module. Here the standard
//! stable sort runs once, over positions, with the comparison behind a
//! reference; the elements are then moved into that order in place. The
//! order is the standard sort's (equal elements keep theirs); what it
//! costs is one list of positions per sort. The encoder's sorts, which a
//! call with a large table runs, keep `sort_by`.

use std::cmp::Ordering;

/// `items.sort_by(compare)`, through the one sort.
pub fn sort_by<T>(items: &mut [T], compare: impl Fn(&T, &T) -> Ordering) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    sort_positions(&mut order, &|a, b| compare(&items[a], &items[b]));
    put_in_order(items, &mut order);
}

/// `items.sort_by_key(key)`, through the one sort.
pub fn sort_by_key<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K) {
    sort_by(items, |a, b| key(a).cmp(&key(b)));
}

/// `items.sort()`, through the one sort.
pub fn sort<T: Ord>(items: &mut [T]) {
    sort_by(items, T::cmp);
}

fn sort_positions(order: &mut [usize], compare: &dyn Fn(usize, usize) -> Ordering) {
    order.sort_by(|&a, &b| compare(a, b));
}

/// Moves `items[order[k]]` to `k` for every `k`, one cycle of the
/// permutation at a time; `order` is spent (each position marked done).
fn put_in_order<T>(items: &mut [T], order: &mut [usize]) {
    const DONE: usize = usize::MAX;
    for start in 0..items.len() {
        let mut at = start;
        while order[at] != DONE {
            let from = order[at];
            order[at] = DONE;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_the_standard_stable_sort_does() {
        // Every arrangement of a few elements with repeated keys: the
        // cycles of the permutation take every shape.
        let base = [(3, 'a'), (1, 'b'), (3, 'c'), (0, 'd'), (1, 'e'), (2, 'f')];
        let mut seed = 7u64;
        for _ in 0..500 {
            let mut items = base.to_vec();
            for i in (1..items.len()).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                items.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let mut expected = items.clone();
            expected.sort_by_key(|p| p.0);
            sort_by_key(&mut items, |p| p.0);
            assert_eq!(items, expected);
        }
    }

    #[test]
    fn sorts_nothing_and_one() {
        let mut none: Vec<u8> = vec![];
        sort(&mut none);
        let mut one = vec![5];
        sort(&mut one);
        assert_eq!(one, [5]);
    }
}
