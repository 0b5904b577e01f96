//! Counting what a pass could not analyse into each input's [`InputReport`] (the types live in
//! the model: `tailhunt_model::evidence::capture`).

use tailhunt_model::evidence::capture::{InputReport, LinkTypeFrames};

use crate::packet::LinkType;

/// Counts a frame of a link type the decoder does not read.
pub fn count_link_type(report: &mut InputReport, link: LinkType) {
    let n = link.number();
    match report
        .link_types_not_analysed
        .iter_mut()
        .find(|l| l.link_type == n)
    {
        Some(l) => l.frames += 1,
        None => report.link_types_not_analysed.push(LinkTypeFrames {
            link_type: n,
            name: LinkType::name_of(n),
            frames: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::evidence::capture::{link_types_not_analysed, LinkTypeSummary};

    fn input(known: u64, unknown: &[(u32, u64)]) -> InputReport {
        let mut r = InputReport::new("f".into());
        r.frames = known;
        for &(n, frames) in unknown {
            for _ in 0..frames {
                count_link_type(&mut r, LinkType::from_number(n));
                r.frames += 1;
            }
        }
        r
    }

    #[test]
    fn link_types_are_summed_per_type_and_named() {
        let all = [
            input(0, &[(147, 3)]),
            input(0, &[(147, 2)]),
            input(5, &[(127, 4)]),
            input(0, &[(127, 1)]),
        ];
        let sums = link_types_not_analysed(&all);
        let text: Vec<String> = sums.iter().map(LinkTypeSummary::describe).collect();
        assert_eq!(
            text,
            vec![
                "link type 127 (IEEE802_11_RADIO): 5 frame(s) in 2 files not analysed",
                "link type 147 (USER0): 2 files not analysed",
            ]
        );
        assert_eq!(all[2].frames_of_known_link_types(), 5);
    }

    #[test]
    fn link_type_names_cover_the_numbers_libpcap_names_differently() {
        assert_eq!(LinkType::name_of(1).as_deref(), Some("EN10MB"));
        assert_eq!(LinkType::name_of(101).as_deref(), Some("RAW"));
        assert_eq!(LinkType::name_of(162).as_deref(), Some("USER15"));
        assert_eq!(LinkType::name_of(276).as_deref(), Some("LINUX_SLL2"));
        assert_eq!(LinkType::name_of(65000), None);
    }
}
