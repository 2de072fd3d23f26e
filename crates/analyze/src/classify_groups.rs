//! Rank groups (TP or PP communicators' members) indexed by rank, for the
//! inference rules of `classify` that compare one communicator with every
//! group: only the groups sharing a rank with it can have members in common,
//! so each question costs the communicator's members times the groups per
//! rank, not communicators × groups (quadratic at 100,000 ranks).

use std::collections::HashMap;

/// Groups of global ranks and, per rank, the groups holding it.
pub(super) struct GroupIndex<'a> {
    groups: Vec<&'a [u32]>,
    by_rank: HashMap<u32, Vec<usize>>,
}

impl<'a> GroupIndex<'a> {
    pub fn new(groups: impl IntoIterator<Item = &'a [u32]>) -> Self {
        let groups: Vec<&[u32]> = groups.into_iter().collect();
        let mut by_rank: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, g) in groups.iter().enumerate() {
            for &r in g.iter() {
                let v = by_rank.entry(r).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
        }
        GroupIndex { groups, by_rank }
    }

    /// Members of group `g` found in `ranks` (sorted), duplicates in `g` counted.
    fn common(g: &[u32], ranks: &[u32]) -> usize {
        g.iter().filter(|r| ranks.binary_search(r).is_ok()).count()
    }

    /// Calls `f(group)` once per group sharing a rank with `ranks`; stops at `false`.
    fn all_touching(&self, ranks: &[u32], mut f: impl FnMut(&[u32]) -> bool) -> bool {
        let mut seen: Vec<usize> = Vec::new();
        for r in ranks {
            for &i in self.by_rank.get(r).map_or(&[][..], Vec::as_slice) {
                if !seen.contains(&i) {
                    seen.push(i);
                    if !f(self.groups[i]) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Every group lies wholly inside `ranks` (sorted) or wholly outside it.
    pub fn whole_groups_only(&self, ranks: &[u32]) -> bool {
        self.all_touching(ranks, |g| Self::common(g, ranks) == g.len())
    }

    /// No group has more than one member in `ranks` (sorted).
    pub fn at_most_one_in_common(&self, ranks: &[u32]) -> bool {
        self.all_touching(ranks, |g| Self::common(g, ranks) <= 1)
    }
}

#[cfg(test)]
mod tests {
    use super::GroupIndex;

    /// The brute-force answers the index replaces, on every subset of 0..6.
    #[test]
    fn agrees_with_scanning_every_group() {
        let groups: Vec<Vec<u32>> = vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![0, 2, 4], vec![1, 1]];
        let idx = GroupIndex::new(groups.iter().map(Vec::as_slice));
        let common = |g: &[u32], e: &[u32]| g.iter().filter(|r| e.contains(r)).count();
        for mask in 0u32..64 {
            let e: Vec<u32> = (0..6).filter(|b| mask & (1 << b) != 0).collect();
            let whole = groups.iter().all(|g| [0, g.len()].contains(&common(g, &e)));
            let ortho = groups.iter().all(|g| common(g, &e) <= 1);
            assert_eq!(idx.whole_groups_only(&e), whole, "{e:?}");
            assert_eq!(idx.at_most_one_in_common(&e), ortho, "{e:?}");
        }
    }
}
