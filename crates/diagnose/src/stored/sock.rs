//! Transfer and sockets runs: their report documents.

use tailhunt_model::evidence::sock::{SocketsReport, TransferReport};
use tailhunt_model::{Finding, Run, RunKind};
use tailhunt_store::Store;

use super::DiagnoseError;

pub(super) fn diagnose(store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let missing = || DiagnoseError::NoEvidence {
        run: run.id.clone(),
        kind: run.kind.clone(),
        what: "report",
        why: "its writer stopped before the end",
    };
    Ok(match run.kind {
        RunKind::Transfer => {
            let r = store
                .evidence::<TransferReport>(&run.id)?
                .ok_or_else(missing)?;
            crate::sock::diagnose_transfer(&r)
        }
        _ => {
            let r = store
                .evidence::<SocketsReport>(&run.id)?
                .ok_or_else(missing)?;
            crate::sock::diagnose_sockets(&r)
        }
    })
}
