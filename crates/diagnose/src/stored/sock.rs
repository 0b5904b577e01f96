//! Transfer and sockets runs: their report documents.

use tailhunt_model::{Finding, Run, RunKind};
use tailhunt_sock::monitor::SocketsReport;
use tailhunt_sock::transfer::TransferReport;
use tailhunt_store::{Store, StoreError};

use super::DiagnoseError;

pub(super) fn diagnose(_store: &Store, run: &Run) -> Result<Vec<Finding>, DiagnoseError> {
    let name = run.kind.name();
    let unreadable = |e: serde_json::Error| {
        DiagnoseError::Store(StoreError::Document {
            run: run.id.clone(),
            name: name.to_string(),
            reason: e.to_string(),
        })
    };
    Ok(match run.kind {
        RunKind::Transfer => {
            let r: TransferReport =
                serde_json::from_value(run.params["transfer"].clone()).map_err(unreadable)?;
            crate::sock::diagnose_transfer(&r)
        }
        _ => {
            let r: SocketsReport =
                serde_json::from_value(run.params["sockets"].clone()).map_err(unreadable)?;
            crate::sock::diagnose_sockets(&r)
        }
    })
}
