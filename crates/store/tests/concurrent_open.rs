//! Commands that start together set up the same new store at once (the lab's cold-path
//! scenario starts two probe runs in the same instant): every one of them must open it.

use std::sync::{Arc, Barrier};

use tailhunt_store::Store;

#[test]
fn many_processes_worth_of_opens_of_one_new_file_all_succeed() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("t{round}.db"));
        let start = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (path, start) = (path.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    Store::open(&path).map(|_| ())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
    }
}
