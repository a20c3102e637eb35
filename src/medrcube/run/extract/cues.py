"""The words a reading turns on, in the languages the cube's users write (English, German,
French, Spanish, Portuguese, Chinese): negation, retraction, verdicts, yes and no.

Kept apart from the strategies so that a language is added in one place. Every list errs
on the side of seeing a negation or a retraction: a cue seen where there was none makes a
reply unreadable (a judge or a human reads it), a cue missed makes a wrong answer right.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache

# Negation anywhere in a finding's clause (its sentence, up to ".", ";", "!", "?" or a
# line end), the finding's own words and every option's text blanked out first: "no
# evidence of pneumothorax", "pneumothorax is not seen", "has been ruled out", "is
# unlikely", "anything but cardiomegaly", "kein Pneumothorax", "pas de pneumothorax",
# "sin neumotórax", "sem pneumotórax", "未见气胸". The whole clause, not a window: "no
# pneumothorax, effusion or consolidation" negates all three.
_NEG_WORDS = (
    # English
    r"no|not|none|nor|neither|never|without|absent|absence|unlikely|improbable|excluded?|excluding|"
    r"exclusion|ruled?\s+out|rules\s+out|negative|less\s+likely|isn['’]t|aren['’]t|doesn['’]t|don['’]t|"
    r"cannot|can['’]t|lacks?|lacking|denies|free\s+of|anything\s+but|all\s+but|other\s+than|"
    r"rather\s+than|instead\s+of|except|"
    # German
    r"kein|keine|keinen|keinem|keiner|keines|nicht|ohne|weder|ausgeschlossen|ausschluss|"
    r"unwahrscheinlich|fehlt|außer|statt|"
    # French
    r"pas|aucun|aucune|sans|ni|exclue?s?|absente?s?|peu\s+probable|hormis|sauf|"
    # Spanish
    r"sin|ningún|ninguna|ninguno|descartad[oa]s?|descarta|ausente|poco\s+probable|excepto|nunca|"
    # Portuguese
    r"não|nao|sem|nenhum|nenhuma|excluíd[oa]s?|improvável|pouco\s+provável|exceto|ausência"
)
CLAUSE_NEGATION = re.compile(
    rf"(?<![^\W\d_])(?:{_NEG_WORDS})(?![^\W\d_])|未见|未发现|排除|不|无|没有|非|否认", re.I
)
# Clauses end at a sentence end, and at a contrast after a comma ("no pneumothorax, but
# consolidation"; not "anything but cardiomegaly", which has no comma).
CLAUSE_END = re.compile(
    r"[.!?;](?=\s|$)|[\n。；！？]|,\s*(?:but|however|whereas|so|therefore|hence|thus|aber|jedoch|also|daher|mais|"
    r"cependant|donc|pero|sin\s+embargo|así\s+que|por\s+lo\s+tanto|mas|porém|contudo|portanto|logo)(?![^\W\d_])"
    r"|[,，]?\s*(?:但是|但|然而|所以|因此)",
    re.I,
)

# A retraction or self-correction: the answer before it is not committed. A strong cue
# always withdraws it ("just kidding", "scratch that", "A. No, B."); a weak one
# ("actually", "wait", "I mean") only when what follows names another answer or says
# no, so that "Answer: B. Actually, the consolidation is lobar." stays B.
# Searched in the ASCII-lowercased reply (same length, so offsets carry over) with no
# re.I and no look-behind at the start, so that the engine skips quickly to candidates;
# that a word cue starts a word is checked where it is used (corrections.py).
RETRACTION_STRONG = re.compile(
    r"(?:just\s+kidding|jk|scratch\s+that|i\s+take\s+(?:that|it)\s+back|correction|"
    r"on\s+second\s+thought|i\s+was\s+wrong|my\s+(?:mistake|bad)|let\s+me\s+correct|"
    r"ignore\s+(?:that|this|the\s+above|my\s+(?:previous|last|first)\s+answer)|"
    r"disregard\s+(?:that|this|the\s+above|my\s+(?:previous|last|first)\s+answer)|strike\s+that|never\s+mind|"
    r"i\s+misread|edit(?=\s*:)|typo|i\s+meant|meant\s+to\s+(?:say|write)|"
    r"nein\s+warte|korrektur|doch\s+nicht|war\s+nur\s+spa(?:ß|ss)|"
    r"je\s+plaisante|je\s+rigole|je\s+me\s+suis\s+tromp[ée]|"
    r"es\s+broma|corrijo|me\s+equivoqu[ée]|"
    r"brincadeira|corrigindo|me\s+enganei)(?![^\W\d_])"
    r"|不对|更正|开玩笑|说错了",
)
# A bare "no" opening a correction: "A. No, B.", "Yes — no, actually not." (strong).
RETRACTION_NO = re.compile(r"[.!;:,?—–-]\s*(?:no|nein|non|não)\s*[,.!:;—–-]")
RETRACTION_NO_OPENING = re.compile(r"\s*(?:no|nein|non|não)\s*[,.!:;—–-]")  # the same at the reply's start
RETRACTION_WEAK = re.compile(
    r"(?:actually|wait|i\s+mean|rather|sorry|hmm|on\s+reflection|"
    r"eigentlich|moment|ich\s+meine|vielmehr|"
    r"en\s+fait|attendez|attends|je\s+veux\s+dire|plutôt|"
    r"en\s+realidad|espera|quiero\s+decir|mejor\s+dicho|"
    r"na\s+verdade|espere|quero\s+dizer|aliás)(?![^\W\d_])"
    r"|其实|等等|我是说|应该是",
)
# A word of every word cue above (CJK cues by substring): replies holding none (most)
# skip both patterns. Checked against `words(...)`, one set lookup per word.
CUE_WORDS = frozenset(
    "kidding jk scratch take correction thought wrong mistake bad correct ignore disregard strike mind "
    "misread edit typo meant nein korrektur nicht spaß spass plaisante rigole trompé trompe broma corrijo "
    "equivoqué equivoque brincadeira corrigindo enganei actually wait mean rather sorry hmm reflection "
    "eigentlich moment meine vielmehr fait attendez attends dire plutôt realidad espera decir dicho verdade "
    "espere dizer aliás".split()
)
CUE_CJK = ("不对", "更正", "开玩笑", "说错了", "其实", "等等", "我是说", "应该是")

_WORD = re.compile(r"[^\W\d_]+")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def lower_ascii(text: str) -> str:
    """ASCII letters lowercased, nothing else changed: offsets carry over, and the strings
    every scan of one reply makes are equal (so `words` computes once)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


@lru_cache(maxsize=64)
def words(low: str) -> frozenset[str]:
    """The words of a lowercased reply: fast gates for the scans (a set lookup per word)."""
    return frozenset(_WORD.findall(low))


# What follows an answer and rejects it: "B is wrong", "A: incorrect", "C - not
# correct", "D ist falsch", "A est faux", "B es incorrecta", "C é errada", "A错误",
# "A: no" (a "no" that ends the clause: "A: no pneumothorax" is no verdict). Not
# after a comma or a full stop ("A, not B" prefers A; "B. No other option fits" is a new
# sentence), and "not" followed by another option contrasts rather than rejects.
REJECTED_AFTER = re.compile(
    r"\s*(?:[:)\-–—=]\s*)?(?:(?:is|was|seems|appears|would\s+be|ist|est|es|é)\s+)?"
    r"(?:(?:definitely|clearly|probably)\s+)?"
    r"(?:not(?![^\W\d_])(?!\s+(?:option\s+)?[\(\[]?[A-Z](?![^\W\d_]))|incorrect|wrong|false|unlikely|"
    r"excluded|ruled\s+out|nicht|falsch|inkorrekt|faux|fausse|incorrecte|incorrect[oa]|fals[oa]|"
    r"no\s+es|errad[oa]|incorret[oa]|não|错误|不对|不正确|错|"
    r"(?<=[:=\-–—]\s)no(?=\s*(?:[.,;!)]|$)))",
    re.I,
)

# The marks of a rejected option (not ×, also a multiplication sign). A cross after a
# letter or an option's text rejects it, a full stop between them too ("A. ✗", "Normal ✗").
CROSSES = "✗✘❌☒"
REJECTED_SIGN = re.compile(rf"[\s.:)\-–—=]*[{CROSSES}]")


def _words(latin: str, other: str) -> re.Pattern[str]:
    """Latin words matched whole (not inside a longer word), symbols and CJK anywhere."""
    return re.compile(rf"(?<![^\W\d_])(?:{latin})(?![^\W\d_])|{other}", re.I)


# Verdicts on one option, in a per-option list ("Option C: correct", "B) falsch"). The
# negative list is tried first ("incorrect" holds "correct", "不正确" holds "正确").
VERDICT_NEGATIVE = _words(
    r"incorrect|not\s+correct|not\s+right|not\s+likely|wrong|false|no|unlikely|less\s+likely|excluded|"
    r"falsch|unzutreffend|inkorrekt|unwahrscheinlich|improbable|peu\s+probable|poco\s+probable|improvável|"
    r"nicht\s+korrekt|incorrecte|faux|fausse|incorrecta|incorrecto|falso|falsa|err[óo]nea|err[óo]neo|"
    r"incorreta|incorreto|errada|errado",
    r"[✗✘❌☒×]|错误|不正确|不对|错",
)
VERDICT_POSITIVE = _words(
    r"correct|true|yes|right(?=\s*(?:[.,;!)]|$|\s+answer))|richtig|zutreffend|korrekt|wahr|correcte|vrai|correcta|correcto|"
    r"verdadero|verdadera|correta|correto|certa|certo|verdadeira|(?:most\s+)?likely|wahrscheinlich|probable|"
    r"provável",
    r"[✓✔☑✅]|正确|对",
)

# A word of every positive verdict (symbols and CJK by substring): a verdict list needs
# one, most replies have none.
VERDICT_POSITIVE_WORDS = frozenset(
    "correct correcte correcta correcto correta correto true yes right richtig zutreffend korrekt wahr vrai "
    "verdadero verdadera verdadeira certa certo likely wahrscheinlich probable provável".split()
)
VERDICT_POSITIVE_SIGNS = ("✓", "✔", "☑", "✅", "正确", "对")
# A word of every answer marker of the other languages (MARKER_COLON, MARKER_PHRASES).
MARKER_WORDS = frozenset(
    "antwort lösung losung réponse reponse respuesta resposta beurteilung diagnose impresión impresion "
    "diagnóstico diagnostico impressão impressao opción opcion alternativa opção opcao wähle wahle choisis elijo "
    "escojo escolho selecciono seleciono".split()
)
REPORT_MARKERS = ("impression:", "conclusion:", "diagnosis:", "impression :", "conclusion :")

# The two sides of a yes/no question, whatever language its options are in.
YES_WORDS = frozenset("yes ja oui sí si sim 是 有 对".split())
NO_WORDS = frozenset("no nein non não nao 否 无 没有 不是".split())

# Answer markers in the other languages, searched in the ASCII-lowercased text (accented
# capitals stay capitals there, hence [éÉ]). Rank 1: declarations ("Antwort: B",
# "Réponse : C", "Respuesta final: D"); rank 2: phrases in prose ("die richtige Antwort
# ist B", "la bonne réponse est C", "la respuesta correcta es D", "a resposta é B").
MARKER_COLON = re.compile(
    r"(?:antwort|l[öÖo]sung|r[éÉe]ponse|respuesta|resposta)(?:\s+(?:finale?|final|endg[üÜ]ltige))?"
    r"\s*(?:[:：=]|-(?=\s))"
    # a report's conclusion: "Impression: pneumonia", "Beurteilung: ...", "Conclusion : ..."
    r"|(?:impression|conclusion|diagnosis|beurteilung|diagnose|impresi[óÓo]n|diagn[óÓo]stico|impress[ãÃa]o)"
    r"\s*[:：=]"
)
# The English report markers alone are common words in prose ("the diagnosis is ..."):
# they open the scans above only as "Impression:" etc., see MARKER_WORDS.
MARKER_PHRASES = (
    re.compile(
        r"(?:(?:antwort|l[öÖo]sung|option|diagnose)\s+(?:ist|lautet|w[äÄa]re)\b"
        r"|r[éÉe]ponse\s+(?:correcte\s+|finale\s+)?(?:est|serait)\b"
        r"|(?:respuesta|opci[óÓo]n)\s+(?:correcta\s+|final\s+)?(?:es|ser[íÍi]a)\b"
        r"|(?:resposta|alternativa|op[çÇc][ãÃa]o)\s+(?:correta\s+|final\s+)?(?:[éÉ]|e|seria)(?![A-Za-z]))"
        # an article before the letter: "es la C", "é a B" (not "é a." nor "é a pneumonia")
        r"(?:\s+(?:la|el|a|o|le)(?=\s+[a-z](?![a-z])))?"
    ),
    re.compile(
        r"(?:ich\s+w[äÄa]hle|je\s+choisis|elijo|escojo|escolho|selecciono|seleciono)\b"
        r"(?:\s+(?:die\s+)?(?:option|l['’]option|la\s+opci[óÓo]n|a\s+op[çÇc][ãÃa]o))?"
    ),
)
# Chinese phrases with no word boundaries: "我选B", "选择C", "应选D", "正确选项是A".
MARKER_ZH = re.compile(r"(?:我?选择?|应选|正确选项(?:是|为)|选项(?:是|为))\s*[:：]?\s*(?=[A-Za-z](?![A-Za-z]))")

# A marker labelled wrong: "Wrong answer: A", "incorrect option: B", "falsche Antwort: C".
WRONG_LABEL = re.compile(
    r"(?:wrong|incorrect|false|not\s+the|falsche|inkorrekte|mauvaise|incorrecte|incorrecta|"
    r"err[óÓo]nea|errada|incorreta|错误)[ \t]{0,3}\Z",
    re.I,
)
