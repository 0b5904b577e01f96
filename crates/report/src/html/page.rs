//! The page around the charts: findings first, then each run's trust facts and charts, with
//! the style and the little script (hover values, legend toggles, `#only=ID`) inline, so the
//! one file opens anywhere without fetching anything.

use std::fmt::Write;

use tailhunt_model::{Finding, Verdict};

use crate::html::run::{Chart, RunSection};
use crate::html::svg::esc;

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1000px;margin:0 auto;padding:16px 20px 60px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:4px 0}.sub{color:#666;margin:0 0 10px}
ol.findings{padding-left:22px}ol.findings>li{margin:0 0 10px;padding:6px 10px;background:#fff;border-left:4px solid #999}
li.detected{border-color:#d62728!important}li.warning{border-color:#ff7f0e!important}li.ruled-out{border-color:#2ca02c!important;color:#555}
.verdict{font-weight:600}.fix{margin-top:3px}.fix b{color:#2a7}.ev{color:#555;font-size:13px;margin:2px 0 0 0;padding-left:16px}
figure{background:#fff;margin:14px 0;padding:10px 12px;border:1px solid #e3e3e3;border-radius:4px}
figcaption{color:#444;font-size:13px;margin-top:4px;max-width:940px}
svg.chart{display:block;max-width:100%;height:auto;font-size:11px}
svg .grid line{stroke:#eee}svg .grid text{fill:#666}svg .frame{fill:none;stroke:#bbb}
svg .axis-title{fill:#444;font-size:12px}svg .note{fill:#333;font-size:11px}
svg .band rect{fill:#888;fill-opacity:.12}svg .band.burst rect{fill:#d62728;fill-opacity:.16}svg .band.limited rect{fill:#ff7f0e;fill-opacity:.18}
svg .band.throttled rect{fill:#9467bd;fill-opacity:.2}svg .band.mode rect{fill:#2ca02c;fill-opacity:.10}svg .band.period rect{fill:#1f77b4;fill-opacity:.10}svg .band.failing rect{fill:#d62728;fill-opacity:.14}svg .band.failing .band-label{fill:#b3261e}
svg .rule.change line{stroke:#6a1b9a;stroke-width:1.5;stroke-dasharray:6,3}svg .rule.change text{fill:#6a1b9a;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}svg .band-label{fill:#2a7a2a;font-size:11px;text-anchor:middle}
svg .rule line{stroke:#555;stroke-dasharray:3,3}svg .rule text{fill:#333}svg .rule.warn line{stroke:#d62728;stroke-width:1.5}svg .rule.warn text{fill:#d62728;font-weight:600}
svg .rule.link line{stroke:#d62728;stroke-dasharray:6,3}svg .rule.link text{fill:#d62728}
svg .legend-item{cursor:pointer}svg .legend-item text{fill:#333}svg .legend-item.off{opacity:.35}
table.facts{border-collapse:collapse;font-size:13px;margin:6px 0}table.facts td{padding:2px 10px 2px 0;vertical-align:top}table.facts td:first-child{color:#666;white-space:nowrap}
td.doubt{color:#b3261e;font-weight:600}.missing{color:#8a5a00;background:#fff8e5;padding:6px 10px;border-radius:4px;font-size:13px}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:4px 7px;border-radius:3px;display:none;white-space:pre;z-index:9}
nav a{margin-right:10px}body.only main>*:not(.keep){display:none}body.only section>*:not(.keep){display:none}
"#;

/// Hover values (from each line's `data-v`), legend toggles, `#only=ID` (one chart alone, for
/// screenshots), and the page height in `data-height` (for full-page screenshots).
const SCRIPT: &str = r#"
(function(){
var U={ns:function(v){var a=Math.abs(v);if(a<1e3)return r(v)+'ns';if(a<1e6)return r(v/1e3)+'us';if(a<1e9)return r(v/1e6)+'ms';return r(v/1e9)+'s'},
s:function(v){return r(v)+'s'},B:function(v){return k(v,1024,['B','KiB','MiB','GiB'])},rate:function(v){return k(v,1000,['','k','M'])+'/s'},
bit:function(v){return k(v,1000,['bit/s','kbit/s','Mbit/s','Gbit/s'])},share:function(v){return r(v*100)+'%'},n:function(v){return k(v,1000,['','k','M','G'])}};
function r(v){var a=Math.abs(v);return a>=100?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2)}
function k(v,b,u){var i=0;while(Math.abs(v)>=b&&i<u.length-1){v/=b;i++}return r(v)+u[i]}
var tip=document.createElement('div');tip.id='tip';document.body.appendChild(tip);
document.querySelectorAll('svg.chart').forEach(function(svg){
 var x=(svg.getAttribute('data-x')||'').split(',');if(x.length<6)return;
 var log=x[0]==='log',lo=+x[1],hi=+x[2],p0=+x[3],p1=+x[4],fx=U[x[5]]||U.n,fy=U[svg.getAttribute('data-y')]||U.n;
 var w=+svg.getAttribute('width');
 function inv(px){var u=(px-p0)/(p1-p0);return log?Math.pow(10,Math.log10(lo)+u*(Math.log10(hi)-Math.log10(lo))):lo+u*(hi-lo)}
 svg.addEventListener('mousemove',function(e){
  var b=svg.getBoundingClientRect(),px=(e.clientX-b.left)*w/b.width;if(px<p0||px>p1){tip.style.display='none';return}
  var xv=inv(px),lines=[];
  svg.querySelectorAll('g.series').forEach(function(g){if(g.style.display==='none')return;
   g.querySelectorAll('path.line').forEach(function(p){
    if(!p._v){p._v=p.getAttribute('data-v').split(' ').map(function(t){var q=t.split(',');return[+q[0],+q[1]]})}
    var v=p._v,a=0,z=v.length-1;if(z<0||xv<v[0][0]-(v[z][0]-v[0][0])*.02||xv>v[z][0]+(v[z][0]-v[0][0])*.02)return;
    while(z-a>1){var m=(a+z)>>1;if(v[m][0]<xv)a=m;else z=m}var c=Math.abs(v[a][0]-xv)<Math.abs(v[z][0]-xv)?v[a]:v[z];
    lines.push(g.getAttribute('data-series')+': '+fy(c[1]))})});
  if(!lines.length){tip.style.display='none';return}
  tip.textContent=fx(xv)+'\n'+lines.join('\n');tip.style.display='block';tip.style.left=(e.clientX+14)+'px';tip.style.top=(e.clientY+10)+'px'});
 svg.addEventListener('mouseleave',function(){tip.style.display='none'});
 svg.querySelectorAll('.legend-item').forEach(function(item){item.addEventListener('click',function(){
  var name=item.getAttribute('data-series'),off=!item.classList.contains('off');item.classList.toggle('off',off);
  svg.querySelectorAll('g.series').forEach(function(g){if(g.getAttribute('data-series')===name)g.style.display=off?'none':''})})});
});
var m=/^#only=(.+)$/.exec(location.hash);
if(m){var el=document.getElementById(decodeURIComponent(m[1]));if(el){document.body.classList.add('only');el.classList.add('keep');for(var i=0;i<el.children.length;i++)el.children[i].classList.add('keep');var p=el.parentElement;while(p&&p.tagName!=='MAIN'){p.classList.add('keep');p=p.parentElement}}}
document.documentElement.setAttribute('data-height',String(Math.ceil(document.documentElement.scrollHeight)));
})();
"#;

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Detected => "detected",
        Verdict::RuledOut => "ruled-out",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Warning => "warning",
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Detected => "detected",
        Verdict::RuledOut => "ruled out",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Warning => "warning",
    }
}

/// A finding ranked in the page, with the run it came from and the chart that shows it.
pub struct Ranked<'a> {
    /// The finding.
    pub finding: &'a Finding,
    /// The run's heading.
    pub run: String,
    /// The chart that shows its evidence.
    pub chart: Option<(String, String)>,
}

fn findings_html(out: &mut String, ranked: &[Ranked<'_>], runs: usize) {
    out.push_str(r#"<section id="findings"><h2>Findings</h2>"#);
    if ranked.is_empty() {
        out.push_str("<p>No detector found its cause in these runs. The charts below show what was measured.</p>");
    }
    out.push_str(r#"<ol class="findings">"#);
    for r in ranked {
        let f = r.finding;
        let _ = write!(
            out,
            r#"<li class="{}"><span class="verdict">{} · {}</span> ({} confidence{}) — {}"#,
            verdict_class(f.verdict),
            esc(&f.detector),
            verdict_name(f.verdict),
            format_args!("{:.0}%", f.confidence * 100.0),
            if runs > 1 {
                format!(", {}", esc(&r.run))
            } else {
                String::new()
            },
            esc(&f.summary)
        );
        if !f.evidence.is_empty() {
            out.push_str(r#"<ul class="ev">"#);
            for e in f.evidence.iter().take(4) {
                let _ = write!(out, "<li>{}</li>", esc(&e.note));
            }
            out.push_str("</ul>");
        }
        if let Some(fix) = &f.fix {
            let _ = write!(out, r#"<div class="fix"><b>Fix:</b> {}</div>"#, esc(fix));
        }
        if let Some((id, title)) = &r.chart {
            let _ = write!(
                out,
                r##"<div><a href="#{}">See the evidence: {}</a></div>"##,
                esc(id),
                esc(title)
            );
        }
        out.push_str("</li>");
    }
    out.push_str("</ol></section>");
}

fn figure(out: &mut String, c: &Chart) {
    let _ = write!(
        out,
        r#"<figure id="{}" data-kind="{}"><h3>{}</h3>{}<figcaption>{}</figcaption></figure>"#,
        esc(&c.id),
        c.kind.name(),
        esc(&c.title),
        c.svg,
        esc(&c.caption)
    );
}

/// A run's heading: its label, kind and id.
pub fn run_heading(section: &RunSection, label: Option<&str>) -> String {
    let tag = section.run.params.get("tag").and_then(|t| t.as_str());
    let mut h = String::new();
    if let Some(l) = label {
        h.push_str(l);
        h.push_str(": ");
    }
    let _ = write!(h, "{} run {}", section.run.kind, section.run.id);
    if let Some(t) = tag {
        let _ = write!(h, " [{t}]");
    }
    h
}

/// The whole page.
pub fn page(
    title: &str,
    subtitle: &str,
    ranked: &[Ranked<'_>],
    compare: &[Chart],
    runs: &[(String, &RunSection)],
) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>{t}</title><style>{STYLE}</style></head><body><main><header><h1>{t}</h1><p class="sub">{s}</p></header>"#,
        t = esc(title),
        s = esc(subtitle)
    );
    out.push_str("<nav>");
    out.push_str(r##"<a href="#findings">Findings</a>"##);
    if !compare.is_empty() {
        out.push_str(r##"<a href="#compare">Comparison</a>"##);
    }
    for (h, s) in runs {
        let _ = write!(out, r##"<a href="#run-{}">{}</a>"##, esc(&s.run.id), esc(h));
    }
    out.push_str("</nav>");
    findings_html(&mut out, ranked, runs.len());
    if !compare.is_empty() {
        out.push_str(r#"<section id="compare"><h2>Comparison</h2>"#);
        compare.iter().for_each(|c| figure(&mut out, c));
        out.push_str("</section>");
    }
    for (heading, s) in runs {
        let _ = write!(
            out,
            r#"<section class="run" id="run-{}"><h2>{}</h2>"#,
            esc(&s.run.id),
            esc(heading)
        );
        out.push_str(r#"<details open><summary>How far to trust this run: parameters, host, kernel, the tool's own cost</summary><table class="facts">"#);
        for (k, v) in &s.facts {
            let (class, text) = match v.strip_prefix("! ") {
                Some(rest) => (r#" class="doubt""#, rest),
                None => ("", v.as_str()),
            };
            let _ = write!(
                out,
                "<tr><td>{}</td><td{class}>{}</td></tr>",
                esc(k),
                esc(text)
            );
        }
        out.push_str("</table></details>");
        if !s.missing.is_empty() {
            out.push_str(r#"<div class="missing"><b>Not in this run:</b><ul>"#);
            for m in &s.missing {
                let _ = write!(out, "<li>{}</li>", esc(m));
            }
            out.push_str("</ul></div>");
        }
        s.charts.iter().for_each(|c| figure(&mut out, c));
        out.push_str("</section>");
    }
    let _ = writeln!(out, "</main><script>{SCRIPT}</script></body></html>");
    out
}
