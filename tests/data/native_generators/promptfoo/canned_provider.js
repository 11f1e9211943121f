// An offline promptfoo provider: canned answers by country (no network).
class CannedProvider {
  constructor(options) {
    this.providerId = options.id || 'canned';
    this.answers = (options.config && options.config.answers) || {};
  }
  id() {
    return this.providerId;
  }
  async callApi(prompt, context) {
    const country = context.vars.country;
    const output = Object.prototype.hasOwnProperty.call(this.answers, country) ? this.answers[country] : 'I do not know';
    return { output };
  }
}
module.exports = CannedProvider;
