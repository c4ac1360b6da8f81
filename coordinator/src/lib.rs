//! The coordinator of nqueens-cluster, as a library (the `nqueens` command is its own package).
//!
//! Three layers, from the top: [`wire`] (gRPC, the server, authentication, connections, the web page
//! and status JSON), [`service`] (one [`Coordinator`] owning the runs, the lease table and the live
//! totals in memory behind a short std mutex; lease policy, workers, strikes, history, progress,
//! metrics), and [`durable`]: the [`store`](durable::store) (sled, one tree per concept) and the [`ledger`](durable::ledger) (an
//! append-only, checksummed copy of every accepted result), written only by the committer thread, which
//! batches commits, fsyncs them and only then lets a report be acknowledged. At start the store and the
//! ledger are reconciled both ways ([`reconcile`](durable::reconcile)); a run's total is exact or the coordinator refuses to
//! start. `docs/architecture.md` draws the layers and the path of a result.

pub mod durable;
pub mod error;
pub mod service;
pub mod wire;

pub use error::{Error, Result};
pub use service::{Config, Coordinator};

#[cfg(test)]
mod layers {
    //! The layers point one way: durable imports neither service nor wire (nor the wire crate,
    //! `nqueens_proto`: the names it checks are domain rules, in `nqueens_common::names`), service does
    //! not import wire (tests aside: a file named `tests.rs`, and whatever follows a file's `#[cfg(test)]`).

    use std::path::Path;

    /// Every `.rs` file under `dir`, with its text up to its first `#[cfg(test)]`.
    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                out.push((path.display().to_string(), code.to_string()));
            }
        }
    }

    #[test]
    fn no_layer_imports_one_above_it() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for (layer, above) in [
            (
                "durable",
                &["crate::service", "crate::wire", "nqueens_proto"][..],
            ),
            ("service", &["crate::wire"][..]),
        ] {
            let mut files = Vec::new();
            sources(&src.join(layer), &mut files);
            assert!(files.len() > 5, "{layer}: {} files", files.len());
            for (path, code) in &files {
                for name in above {
                    assert!(
                        !code.contains(name),
                        "{path} imports {name}, a layer above it"
                    );
                }
            }
        }
    }
}
