// Opens a tab of a rendered Allure report (TAB: behaviors by default, suites, or '' for the
// overview) in headless Chromium, expands the nodes
// named in STEPS (JSON list of [text, nth]; "leaf:" selects a test case), and saves a
// screenshot. Used by scripts/allure-screenshot; a dev tool, not a test dependency.
//   node scripts/allure-behaviors.js URL OUT.png STEPS_JSON [TAB]
const { chromium } = require('playwright-core');
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox','--disable-gpu','--disable-background-networking','--disable-component-update','--disable-sync','--disable-quic','--no-first-run'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1400 } });
  const tab = process.argv[5] === undefined ? 'behaviors' : process.argv[5];
  await page.goto(process.argv[2] + (tab ? '#' + tab : ''), { waitUntil: 'networkidle' });
  await page.waitForTimeout(1500);
  const clickText = async (t, nth = 0) => {
    const el = t.startsWith('leaf:') ? page.locator('.node__name', { hasText: t.slice(5) }).nth(nth) : page.locator('.node__title', { hasText: new RegExp('^\\s*' + t) }).nth(nth);
    await el.click(); await page.waitForTimeout(300);
  };
  for (const step of JSON.parse(process.argv[4] || '[]')) await clickText(step[0], step[1] || 0);
  await page.screenshot({ path: process.argv[3] });
  await browser.close();
})();
