//! The kernel family that computed a result: the CPU's stack kernels, the CPU's work-list kernels, or
//! a GPU. Two results of one job from two families were computed by code that shares no search loop,
//! so a record run prefers its second result from another family (a bug of one family cannot confirm
//! itself). A worker states it; it is never trusted for a count (identities are what verification
//! counts), and results of builds before it name none.

use serde::{Deserialize, Serialize};

use crate::kernel::Variant;

/// A kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Family {
    /// The CPU's stack kernels: one search per lane, a stack per search ([`Variant::Scalar`],
    /// [`Variant::Avx2`] and their kind).
    #[serde(rename = "cpu-stack")]
    CpuStack,
    /// The CPU's work-list kernels: the lanes step nodes of one level from lists ([`Variant::Avx2Lists`]
    /// and its kind).
    #[serde(rename = "cpu-lists")]
    CpuLists,
    /// A GPU kernel (CUDA or OpenCL).
    #[serde(rename = "gpu")]
    Gpu,
}

impl Family {
    /// Every family, in order.
    pub const ALL: [Family; 3] = [Family::CpuStack, Family::CpuLists, Family::Gpu];

    /// Its name, as the certificate, the status and the worker table write it.
    pub fn name(self) -> &'static str {
        match self {
            Family::CpuStack => "cpu-stack",
            Family::CpuLists => "cpu-lists",
            Family::Gpu => "gpu",
        }
    }

    /// The family called `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The family of a CPU kernel variant.
    pub fn of(variant: Variant) -> Family {
        match variant {
            Variant::NeonLists
            | Variant::Sse41Lists
            | Variant::Avx2Lists
            | Variant::Avx512Lists => Family::CpuLists,
            Variant::Scalar
            | Variant::Neon
            | Variant::Sse41
            | Variant::Avx2
            | Variant::Avx2NoGather
            | Variant::Avx512 => Family::CpuStack,
        }
    }

    /// The number of distinct families among `families` (unknown ones aside).
    pub fn distinct(families: &[Option<Family>]) -> usize {
        let mut seen = [false; 3];
        for f in families.iter().flatten() {
            seen[*f as usize] = true;
        }
        seen.iter().filter(|s| **s).count()
    }
}

/// A set of kernel families (what a worker's results were computed by).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FamilySet(u8);

impl FamilySet {
    /// Adds `family`.
    pub fn insert(&mut self, family: Family) {
        self.0 |= 1 << family as u8;
    }

    /// Whether it holds `family`.
    pub fn contains(self, family: Family) -> bool {
        self.0 & (1 << family as u8) != 0
    }

    /// Both sets' families.
    pub fn union(self, other: FamilySet) -> FamilySet {
        FamilySet(self.0 | other.0)
    }

    /// Whether it holds none.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `family` is its only one.
    pub fn only(self, family: Family) -> bool {
        self.0 == 1 << family as u8
    }

    /// Whether it holds a family other than `family`.
    pub fn other_than(self, family: Family) -> bool {
        self.0 & !(1 << family as u8) != 0
    }

    /// Its families, in order.
    pub fn iter(self) -> impl Iterator<Item = Family> {
        Family::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

impl FromIterator<Family> for FamilySet {
    fn from_iter<I: IntoIterator<Item = Family>>(families: I) -> FamilySet {
        let mut set = FamilySet::default();
        for f in families {
            set.insert(f);
        }
        set
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_reads_back_from_its_name_and_every_variant_has_one() {
        for f in Family::ALL {
            assert_eq!(Family::parse(f.name()), Some(f));
            assert_eq!(f.to_string(), f.name(), "shown by its name");
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
        assert_eq!(Family::parse("cpu"), None);
        let lists: Vec<&str> = Variant::ALL
            .into_iter()
            .filter(|v| Family::of(*v) == Family::CpuLists)
            .map(|v| v.name())
            .collect();
        assert_eq!(
            lists,
            ["neon-lists", "sse41-lists", "avx2-lists", "avx512-lists"]
        );
        assert_eq!(Family::of(Variant::Scalar), Family::CpuStack);
        assert_eq!(Family::of(Variant::Avx2NoGather), Family::CpuStack);
    }

    #[test]
    fn a_set_holds_what_was_put_in_it() {
        use Family::*;
        let mut s = FamilySet::default();
        assert!(s.is_empty() && !s.contains(Gpu) && !s.other_than(Gpu) && !s.only(Gpu));
        s.insert(Gpu);
        assert!(s.contains(Gpu) && s.only(Gpu) && !s.other_than(Gpu) && s.other_than(CpuLists));
        assert!(!s.contains(CpuLists) && !s.is_empty());
        let both = s.union([CpuLists].into_iter().collect());
        assert!(!both.only(Gpu) && both.other_than(Gpu) && both.contains(CpuLists));
        assert_eq!(both.iter().collect::<Vec<_>>(), [CpuLists, Gpu]);
        assert!(!both.contains(CpuStack));
        // A family in both sets stays (issue 42: `|` → `^` survived).
        assert_eq!(both.union(s), both);
        let all: FamilySet = Family::ALL.into_iter().collect();
        assert_eq!(all.iter().count(), 3);
    }

    #[test]
    fn distinct_counts_known_families_once() {
        use Family::*;
        assert_eq!(Family::distinct(&[]), 0);
        assert_eq!(Family::distinct(&[None, None]), 0);
        assert_eq!(Family::distinct(&[Some(Gpu), Some(Gpu), None]), 1);
        assert_eq!(Family::distinct(&[Some(Gpu), Some(CpuLists)]), 2);
        assert_eq!(
            Family::distinct(&[Some(CpuStack), Some(CpuLists), Some(Gpu)]),
            3
        );
    }
}
