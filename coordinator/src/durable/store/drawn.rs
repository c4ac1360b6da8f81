//! What a result's lease was drawn for: the one mark that lets a result confirm or second another
//! identity's, and against which results.
//!
//! A lease is issued under a draw (of confirmers, or of a dispute's deciders) only while its job
//! holds results; the mark names the leases those results came under, and the commit lets a result
//! under it agree with one of them and no other. Every other lease (issued before its job held a
//! result, a spot check's, one of an earlier incarnation, or one whose report failed the service's
//! checks) is [`Drawn::Nothing`]: its result may dispute, never confirm. No value of this type made
//! outside the store's own tests confirms a result it does not name: a mark of no results is
//! [`Drawn::Nothing`] (before, an empty list stood for "any result", which only the store's tests
//! meant, in a type the service builds).

/// The leases of the results a lease was drawn against (one per result: the lease it came under).
pub type Sides = Box<[u64]>;

/// What a result's lease was drawn for (the lease table's mark, read as its report is checked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Drawn {
    /// Under no draw: its result confirms and seconds nothing.
    #[default]
    Nothing,
    /// Drawn to confirm one of these results (its job's, when it was issued).
    ToConfirm(Sides),
    /// Drawn to decide the dispute between these results (its job's sides, when it was issued).
    ForDispute(Sides),
    /// Drawn for anything: may confirm any result, and second any dispute's side. The store's tests
    /// mark their results so, to be kept as the service's checks let results be.
    #[cfg(test)]
    Any,
}

impl Drawn {
    /// Drawn to confirm one of `held`; [`Drawn::Nothing`] if `held` is empty.
    pub fn to_confirm(held: Sides) -> Drawn {
        match held.is_empty() {
            true => Drawn::Nothing,
            false => Drawn::ToConfirm(held),
        }
    }

    /// The same results, drawn now to decide the dispute between them (a lease drawn to confirm
    /// becomes one drawn for the dispute; any other mark is kept as it is).
    pub fn for_dispute(self) -> Drawn {
        match self {
            Drawn::ToConfirm(held) => Drawn::ForDispute(held),
            other => other,
        }
    }

    /// Whether a result under this lease may agree with the result that came under lease `side`:
    /// one of those it was drawn against.
    pub fn names(&self, side: u64) -> bool {
        match self {
            Drawn::Nothing => false,
            Drawn::ToConfirm(held) | Drawn::ForDispute(held) => held.contains(&side),
            #[cfg(test)]
            Drawn::Any => true,
        }
    }

    /// Whether it was drawn for the dispute whose sides stand now: each of the sides it was drawn
    /// between is still stored (`stands`). One dropped, and the job left that dispute, whatever it
    /// holds now.
    pub fn decides(&self, stands: impl Fn(u64) -> bool) -> bool {
        match self {
            Drawn::ForDispute(sides) => !sides.is_empty() && sides.iter().all(|&s| stands(s)),
            Drawn::Nothing | Drawn::ToConfirm(_) => false,
            #[cfg(test)]
            Drawn::Any => true,
        }
    }

    /// Whether it was drawn for a dispute (to decide, not to confirm).
    pub fn is_for_dispute(&self) -> bool {
        matches!(self, Drawn::ForDispute(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark of no results confirms and decides nothing: only the test-only `Any` is a wildcard.
    #[test]
    fn a_mark_of_no_results_confirms_and_decides_nothing() {
        let none = Drawn::to_confirm(Box::new([]));
        assert_eq!(none, Drawn::Nothing);
        assert_eq!(none.clone().for_dispute(), Drawn::Nothing);
        assert!(!none.names(0) && !none.decides(|_| true) && !none.is_for_dispute());
        let empty = Drawn::ForDispute(Box::new([]));
        assert!(!empty.names(0) && !empty.decides(|_| true));
    }

    /// A lease drawn to confirm names its results and decides no dispute; drawn for a dispute, it
    /// names the same results, and decides while each of them stands.
    #[test]
    fn a_mark_names_its_results_and_decides_only_while_they_stand() {
        let confirm = Drawn::to_confirm(Box::new([5, 6]));
        assert_eq!(confirm, Drawn::ToConfirm(Box::new([5, 6])));
        assert!(confirm.names(5) && confirm.names(6) && !confirm.names(7));
        assert!(!confirm.decides(|_| true) && !confirm.is_for_dispute());
        let dispute = confirm.for_dispute();
        assert_eq!(dispute, Drawn::ForDispute(Box::new([5, 6])));
        assert!(dispute.names(5) && dispute.names(6) && !dispute.names(7));
        assert!(dispute.is_for_dispute());
        assert!(dispute.decides(|s| s == 5 || s == 6));
        assert!(!dispute.decides(|s| s == 5));
        assert!(!dispute.decides(|s| s == 6));
        assert_eq!(Drawn::Nothing.for_dispute(), Drawn::Nothing);
        assert_eq!(dispute.clone().for_dispute(), dispute);
    }
}
